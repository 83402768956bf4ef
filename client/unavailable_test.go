package client

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"syscall"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	accessv1 "afe.dev/sandbox/api/access/v1alpha1"
)

func TestNotServed(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	tests := map[string]struct {
		err      error
		upgraded bool
		status   int
		want     bool
	}{
		"the API server's 503 to the upgrade":       {errors.New("unable to upgrade connection: service unavailable"), false, http.StatusServiceUnavailable, true},
		"a refused connection":                      {fmt.Errorf("dial: %w", refused), false, 0, true},
		"a stream opened, then broken":              {errors.New("error reading from error stream: EOF"), true, http.StatusSwitchingProtocols, false},
		"a stream opened, then a refused reconnect": {fmt.Errorf("dial: %w", refused), true, http.StatusSwitchingProtocols, false},
		"a WebSocket stream broken (no SPDY ran)":   {errors.New("websocket: close 1006 (abnormal closure)"), false, 0, false},
		"the upgrade refused with 403":              {errors.New("unable to upgrade connection: forbidden"), false, http.StatusForbidden, false},
		"the upgrade refused with 500":              {errors.New("unable to upgrade connection: boom"), false, http.StatusInternalServerError, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := &handshake{}
			h.upgraded.Store(tc.upgraded)
			h.status.Store(int32(tc.status))
			if got := notServed(tc.err, h); got != tc.want {
				t.Errorf("notServed() = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestAnswered(t *testing.T) {
	status := func(code int, reason metav1.StatusReason, cause accessv1.Reason) error {
		st := metav1.Status{Status: metav1.StatusFailure, Code: int32(code), Reason: reason, Message: "m"}
		if cause != "" {
			st.Details = accessv1.Details(cause, "", "")
		}
		return &apierrors.StatusError{ErrStatus: st}
	}
	tests := map[string]struct {
		refusal error
		want    bool
	}{
		"the API server's 503": {status(http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, ""), false},
		"the API server's 503 as client-go makes a Status of it": {&apierrors.StatusError{ErrStatus: metav1.Status{Code: http.StatusServiceUnavailable,
			Reason: metav1.StatusReasonServiceUnavailable, Details: &metav1.StatusDetails{Group: accessv1.GroupName, Kind: "sandboxes",
				Causes: []metav1.StatusCause{{Type: metav1.CauseTypeUnexpectedServerResponse, Message: "error trying to reach service: dial tcp: connection refused"}}}}}, false},
		"no answer (the stream's own error)":   {errors.New("unable to upgrade connection: service unavailable"), false},
		"the access API's NodeUnavailable":     {status(http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, accessv1.ReasonNodeUnavailable), true},
		"the access API's SandboxNotFound":     {status(http.StatusNotFound, metav1.StatusReasonNotFound, accessv1.ReasonSandboxNotFound), true},
		"the API server's 403 (RBAC)":          {status(http.StatusForbidden, metav1.StatusReasonForbidden, ""), true},
		"the API server's 404 (no access API)": {status(http.StatusNotFound, metav1.StatusReasonNotFound, ""), true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := answered(tc.refusal); got != tc.want {
				t.Errorf("answered() = %v, want %v", got, tc.want)
			}
		})
	}
}
