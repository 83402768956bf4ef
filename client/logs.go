package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	accessv1 "afe.dev/sandbox/api/access/v1alpha1"
)

// LogOptions choose which log of a Run Logs reads.
type LogOptions struct {
	// Follow streams the log as it grows until its attempt ends.
	Follow bool
	// Attempt is the attempt whose log is read (0: the latest).
	Attempt int32
}

// Log is the log of one attempt of a Run; the caller closes it.
type Log struct {
	io.ReadCloser
	// Attempt is the attempt whose log this is.
	Attempt int32
}

// Logs is the whole output the manager kept of an attempt of the Run, as
// text, growing until the attempt ends with Follow. An attempt with no
// log (yet) is an error IsNotFound with reason LogNotFound; a manager that
// keeps none, reason LogsNotKept (the Run's status.output, Outcome.Output,
// is what there is).
func (c *Client) Logs(ctx context.Context, run string, o LogOptions) (*Log, error) {
	req := c.subresource("GET", accessv1.ResourceRuns, run, accessv1.SubresourceLog)
	if o.Follow {
		req = req.Param(accessv1.ParamFollow, "true")
	}
	if o.Attempt > 0 {
		req = req.Param(accessv1.ParamAttempt, strconv.Itoa(int(o.Attempt)))
	}
	// The request is built by the REST client and sent with its HTTP
	// client: the answer's attempt header is wanted too.
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, req.URL().String(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.access.Client.Do(hreq)
	if err != nil {
		return nil, wrap(err, "the log of run %s", run)
	}
	if resp.StatusCode != http.StatusOK {
		defer func() { _ = resp.Body.Close() }()
		return nil, wrap(statusOf(resp), "the log of run %s", run)
	}
	l := &Log{ReadCloser: resp.Body, Attempt: o.Attempt}
	if n, err := strconv.ParseInt(resp.Header.Get(accessv1.AttemptHeader), 10, 32); err == nil && n > 0 {
		l.Attempt = int32(n)
	}
	return l, nil
}

// statusOf is the error of an answer other than 200: its Status, as the
// REST client decodes it.
func statusOf(resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	st := &metav1.Status{}
	if json.Unmarshal(body, st) == nil && st.Kind == "Status" {
		return &apierrors.StatusError{ErrStatus: *st}
	}
	return apierrors.NewGenericServerResponse(resp.StatusCode, http.MethodGet, schema.GroupResource{
		Group: accessv1.GroupName, Resource: accessv1.ResourceRuns}, "", strings.TrimSpace(string(body)), 0, false)
}

// TelemetryQuery names whose command records Telemetry reads: a sandbox's
// or every sandbox's of a ticket, the newest Limit of them (0: the API's
// default, 1000).
type TelemetryQuery struct {
	Sandbox, Ticket string
	Limit           int
	// DeniedOnly keeps the denied egress records only (Egress).
	DeniedOnly bool
}

// Telemetry is the record of the commands executed in a sandbox, or in
// every sandbox of a ticket, in order.
func (c *Client) Telemetry(ctx context.Context, q TelemetryQuery) (*accessv1.CommandRecordList, error) {
	raw, err := c.telemetry(ctx, q, false)
	if err != nil {
		return nil, err
	}
	list := &accessv1.CommandRecordList{}
	if err := json.Unmarshal(raw, list); err != nil {
		return nil, fmt.Errorf("read the telemetry: %w", err)
	}
	if list.Kind != accessv1.CommandRecordListKind {
		return nil, fmt.Errorf("read the telemetry: the answer is a %q, not a %s", list.Kind, accessv1.CommandRecordListKind)
	}
	return list, nil
}

// Egress is the record of the egress proxy's decisions of a sandbox, or of
// every sandbox of a ticket, in order (their sequence numbers shared with
// the commands').
func (c *Client) Egress(ctx context.Context, q TelemetryQuery) (*accessv1.EgressRecordList, error) {
	raw, err := c.telemetry(ctx, q, true)
	if err != nil {
		return nil, err
	}
	list := &accessv1.EgressRecordList{}
	if err := json.Unmarshal(raw, list); err != nil {
		return nil, fmt.Errorf("read the egress telemetry: %w", err)
	}
	if list.Kind != accessv1.EgressRecordListKind {
		return nil, fmt.Errorf("read the egress telemetry: the answer is a %q, not a %s", list.Kind, accessv1.EgressRecordListKind)
	}
	return list, nil
}

// telemetry reads the telemetry subresource the query names.
func (c *Client) telemetry(ctx context.Context, q TelemetryQuery, egress bool) ([]byte, error) {
	resource, name := accessv1.ResourceSandboxes, q.Sandbox
	if q.Ticket != "" {
		resource, name = accessv1.ResourceTickets, q.Ticket
	}
	if (q.Sandbox == "") == (q.Ticket == "") {
		return nil, &Error{Kind: KindInvalid, Message: "telemetry needs a sandbox or a ticket, not both"}
	}
	req := c.subresource("GET", resource, name, accessv1.SubresourceTelemetry)
	if q.Limit > 0 {
		req = req.Param(accessv1.ParamLimit, strconv.Itoa(q.Limit))
	}
	if egress {
		req = req.Param(accessv1.ParamEgress, "true")
	}
	if q.DeniedOnly {
		req = req.Param(accessv1.ParamDenied, "true")
	}
	raw, err := req.Do(ctx).Raw()
	if err != nil {
		return nil, wrap(err, "the telemetry of %s %s", resource, name)
	}
	return raw, nil
}
