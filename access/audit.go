package access

import (
	"context"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// Audit: every exec and file transfer through the API is an Event on its
// Sandbox and a log line of the manager, naming the user, what was done and
// how it ended. Each is an Event object of its own, written directly: an
// event recorder would fold accesses that differ only in their note into
// one series, and an audit must not lose one.
const (
	// ExecReason is the reason of an exec's Event.
	ExecReason = "Exec"
	// reportingController is the Events' reporting controller.
	reportingController = "afe.dev/access"
)

// auditExec records an exec: ended (with its exit code) or refused.
func (s *Server) auditExec(ctx context.Context, req *request, t *target, o execOptions, code int, err error) {
	outcome := fmt.Sprintf("exit code %d", code)
	if err != nil {
		outcome = "failed: " + err.Error()
	}
	if o.protocol != "" {
		outcome += ", over " + o.protocol
	}
	s.log.Info("Exec", "user", req.user.GetName(), "groups", req.user.GetGroups(), "namespace", req.namespace,
		"sandbox", req.name, "command", o.command, "tty", o.tty, "stdin", o.stdin, "protocol", o.protocol,
		"exitCode", code, "error", errString(err))
	if t != nil {
		s.event(ctx, t.sbx, err, ExecReason, fmt.Sprintf("User %q ran %s (tty %t): %s", req.user.GetName(), commandText(o.command), o.tty, outcome))
	}
}

// auditFiles records a file transfer: its path, its size (the bytes of
// its tar and of the files in it, or that nothing was written or sent)
// and how it ended.
func (s *Server) auditFiles(ctx context.Context, req *request, t *target, reason, p string, tr transfer, err error) {
	outcome := "done"
	if err != nil {
		outcome = "failed: " + err.Error()
	}
	verb := map[string]string{UploadReason: "uploaded into", DownloadReason: "downloaded"}[reason]
	// An upload writes into the workspace; a download sends to its client.
	moved := map[string]string{UploadReason: "written", DownloadReason: "sent"}[reason]
	written := int64(0)
	size := fmt.Sprintf("%d bytes of tar, nothing %s", tr.tar, moved)
	if tr.written {
		written = tr.files
		size = fmt.Sprintf("%d bytes of tar, %d bytes of files %s", tr.tar, tr.files, moved)
	}
	s.log.Info(reason, "user", req.user.GetName(), "groups", req.user.GetGroups(), "namespace", req.namespace,
		"sandbox", req.name, "path", p, "bytes", tr.tar, "written", written, "error", errString(err))
	if t != nil {
		s.event(ctx, t.sbx, err, reason, fmt.Sprintf("User %q %s %q (%s): %s", req.user.GetName(), verb, p, size, outcome))
	}
}

// event writes an Event about the sandbox; Warning when err is set.
func (s *Server) event(ctx context.Context, sbx *afev1.Sandbox, err error, reason, note string) {
	kind := corev1.EventTypeNormal
	if err != nil {
		kind = corev1.EventTypeWarning
	}
	if len(note) > 1024 {
		note = note[:1021] + "..."
	}
	host, _ := os.Hostname()
	ev := &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: sbx.Namespace, Name: fmt.Sprintf("%s.%s", sbx.Name, rand.String(10))},
		EventTime:  metav1.NewMicroTime(time.Now()),
		Regarding: corev1.ObjectReference{
			APIVersion: afev1.GroupVersion.String(), Kind: "Sandbox",
			Namespace: sbx.Namespace, Name: sbx.Name, UID: sbx.UID,
		},
		Reason:              reason,
		Action:              reason,
		Note:                note,
		Type:                kind,
		ReportingController: reportingController,
		ReportingInstance:   reportingController + "-" + host,
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := s.writer.Create(wctx, ev); err != nil {
		s.log.Error(err, "Cannot record the access as an Event", "namespace", sbx.Namespace, "sandbox", sbx.Name, "note", note)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
