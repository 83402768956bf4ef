package access

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	accessv1 "afe.dev/sandbox/api/access/v1alpha1"
	"afe.dev/sandbox/internal/metrics"
	"afe.dev/sandbox/internal/sandboxspec"
	"afe.dev/sandbox/internal/telemetry"
)

// TelemetryKind is the kind of the answer to sandboxes/NAME/telemetry and
// tickets/NAME/telemetry: a telemetry.RecordList.
const TelemetryKind = telemetry.ListKind

// serveSandboxTelemetry answers GET sandboxes/NAME/telemetry[?limit=N]
// with the newest records (1000 by default) of the sandbox of that name in
// the namespace, every UID it had, in order.
func (s *Server) serveSandboxTelemetry(w http.ResponseWriter, r *http.Request, req *request) {
	s.serveTelemetry(w, r, req, telemetry.Filter{Namespace: req.namespace, Sandbox: req.name})
}

// serveTicketTelemetry answers GET tickets/NAME/telemetry: the records of
// every sandbox of the ticket.
func (s *Server) serveTicketTelemetry(w http.ResponseWriter, r *http.Request, req *request) {
	s.serveTelemetry(w, r, req, telemetry.Filter{Namespace: req.namespace, Ticket: req.name})
}

// serveTelemetry answers with this manager's records and, in per-node
// mode, those of every other node's manager, asked as the caller.
func (s *Server) serveTelemetry(w http.ResponseWriter, r *http.Request, req *request, f telemetry.Filter) {
	if s.opts.Telemetry == nil {
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, accessv1.ReasonTelemetryNotKept, "this manager keeps no command telemetry (--telemetry-db)")
		return
	}
	if l := r.URL.Query().Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 100000 {
			writeError(w, badRequest("limit %q is not a number from 1 to 100000", l))
			return
		}
		f.Limit = n
	}
	if f.Limit == 0 {
		f.Limit = defaultTelemetryLimit
	}
	if eg, ok, err := flag(r, accessv1.ParamEgress); err != nil || ok && eg {
		if err == nil {
			s.serveEgress(w, r, req, f)
		} else {
			writeError(w, err)
		}
		return
	}
	recs, err := s.opts.Telemetry.List(r.Context(), f)
	var pruned []accessv1.PrunedRecords
	if err == nil {
		pruned, err = s.opts.Telemetry.PrunedOf(r.Context(), f, telemetry.KindCommands)
	}
	if err != nil {
		writeError(w, fmt.Errorf("read the telemetry: %w", err))
		return
	}
	writeRecords(s, w, r, req, TelemetryKind, nodeRecords[accessv1.CommandRecord]{Items: recs, Pruned: pruned},
		func(c accessv1.CommandRecord) time.Time { return c.Started }, f.Limit)
}

// defaultTelemetryLimit is how many records an answer holds unless the
// caller asks for another number.
const defaultTelemetryLimit = 1000

// serveEgress answers a telemetry request with ?egress=true: the egress
// records the filter selects, with ?denied=true the denied ones only. The
// same RBAC as the commands' (the subresource is the same).
func (s *Server) serveEgress(w http.ResponseWriter, r *http.Request, req *request, f telemetry.Filter) {
	denied, _, err := flag(r, accessv1.ParamDenied)
	if err != nil {
		writeError(w, err)
		return
	}
	recs, err := s.opts.Telemetry.ListEgress(r.Context(), telemetry.EgressFilter{Filter: f, DeniedOnly: denied})
	var pruned []accessv1.PrunedRecords
	if err == nil {
		pruned, err = s.opts.Telemetry.PrunedOf(r.Context(), f, telemetry.KindEgress)
	}
	if err != nil {
		writeError(w, fmt.Errorf("read the egress telemetry: %w", err))
		return
	}
	writeRecords(s, w, r, req, telemetry.EgressListKind, nodeRecords[accessv1.EgressRecord]{Items: recs, Pruned: pruned},
		func(e accessv1.EgressRecord) time.Time { return e.Time }, f.Limit)
}

// recordList is, in JSON, a CommandRecordList or an EgressRecordList.
type recordList[T any] struct {
	Kind       string                    `json:"kind"`
	APIVersion string                    `json:"apiVersion"`
	Items      []T                       `json:"items"`
	Unanswered []accessv1.UnansweredNode `json:"unanswered,omitempty"`
	Pruned     []accessv1.PrunedRecords  `json:"pruned,omitempty"`
}

// writeRecords answers with this manager's records and, in per-node mode
// (unless another manager asked), every other node's, gathered as the
// caller, with the notes of what the size bounds pruned of them.
func writeRecords[T any](s *Server, w http.ResponseWriter, r *http.Request, req *request, kind string, recs nodeRecords[T], at func(T) time.Time, limit int) {
	var missing []accessv1.UnansweredNode
	if s.peer != nil && req.hop == "" {
		var err error
		if recs, missing, err = gather(s, r, req, recs, at, limit); err != nil {
			writeError(w, err)
			return
		}
	}
	list := recordList[T]{Kind: kind, APIVersion: Group + "/" + Version, Items: recs.Items, Unanswered: missing, Pruned: recs.Pruned}
	if list.Items == nil {
		list.Items = []T{}
	}
	writeJSON(w, http.StatusOK, list)
}

// flag reads a boolean query parameter: its value, whether it was given,
// and a bad request when it is not a boolean.
func flag(r *http.Request, name string) (bool, bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return false, false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, true, badRequest("%s %q is not true or false", name, v)
	}
	return b, true, nil
}

// recordExec puts an exec through the API into the telemetry: the sandbox
// as the target was derived and verified, the caller as the API server
// authenticated them.
func (s *Server) recordExec(ctx context.Context, req *request, t *target, cmd []string, started time.Time, code int, out *telemetry.Output) {
	metrics.Commands.WithLabelValues(telemetry.SourceAPI, string(t.sbx.Status.Phase), telemetry.ExitClass(code)).Inc()
	if s.opts.Telemetry == nil {
		return
	}
	n, sum := out.Sum()
	s.opts.Telemetry.Add(telemetry.Record{
		Namespace: t.sbx.Namespace, Sandbox: t.sbx.Name, SandboxUID: string(t.sbx.UID),
		Ticket: sandboxspec.IdentityOf(t.sbx, s.opts.Instance).Ticket, Started: started, Ended: time.Now(),
		Command: cmd, User: t.user, ExitCode: code, OutputBytes: n, OutputSHA256: sum,
		Source: telemetry.SourceAPI, StartedBy: "user " + req.user.GetName(),
	})
	// The caller may have gone: the commit is waited for on a context of
	// its own, bounded.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordCommitWait)
	defer cancel()
	if err := s.opts.Telemetry.Flush(ctx); err != nil {
		s.log.Error(err, "Cannot commit the record of an exec", "sandbox", t.sbx.Namespace+"/"+t.sbx.Name)
	}
}

// recordCommitWait bounds how long an exec's exit status waits for its
// record to be committed.
const recordCommitWait = 10 * time.Second
