package client

import (
	"errors"
	"net/http"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	accessv1 "afe.dev/sandbox/api/access/v1alpha1"
)

func TestWrapKinds(t *testing.T) {
	refusal := func(code int, reason metav1.StatusReason, cause accessv1.Reason) error {
		st := metav1.Status{Status: metav1.StatusFailure, Code: int32(code), Reason: reason, Message: "refused"}
		if cause != "" {
			st.Details = accessv1.Details(cause, "", "")
		}
		return &apierrors.StatusError{ErrStatus: st}
	}
	tests := map[string]struct {
		err    error
		kind   Kind
		reason string
	}{
		"not ready": {refusal(http.StatusConflict, metav1.StatusReasonConflict, accessv1.ReasonSandboxNotReady), KindNotReady, "SandboxNotReady"},
		"its node's manager is down: not ready, try again": {refusal(http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, accessv1.ReasonNodeUnavailable),
			KindNotReady, "NodeUnavailable"},
		"forbidden": {refusal(http.StatusForbidden, metav1.StatusReasonForbidden, accessv1.ReasonForbidden), KindForbidden, "Forbidden"},
		"not found": {refusal(http.StatusNotFound, metav1.StatusReasonNotFound, accessv1.ReasonSandboxNotFound), KindNotFound, "SandboxNotFound"},
		"the access API not served (the API server's 503): not ready": {refusal(http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, ""),
			KindNotReady, "ServiceUnavailable"},
		"a conflict of names": {refusal(http.StatusConflict, metav1.StatusReasonAlreadyExists, ""), KindConflict, "AlreadyExists"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := wrap(tc.err, "exec in sandbox s")
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("wrap() = %v, not an *Error", err)
			}
			if e.Kind != tc.kind || e.Reason != tc.reason {
				t.Errorf("wrap() = kind %s reason %s, want %s %s", e.Kind, e.Reason, tc.kind, tc.reason)
			}
		})
	}
}
