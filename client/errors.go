package client

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	accessv1 "afe.dev/sandbox/api/access/v1alpha1"
)

// Kind is the class of an Error, what a caller decides on.
type Kind string

// The kinds of Error.
const (
	// KindNotReady: the sandbox is not Ready (yet, or any more), the
	// access API is not served now (503), or, in per-node mode, its
	// node's manager does not answer now.
	KindNotReady Kind = "NotReady"
	// KindTimedOut: the context's deadline or the Run's timeout passed.
	KindTimedOut Kind = "TimedOut"
	// KindForbidden: the caller may not do this.
	KindForbidden Kind = "Forbidden"
	// KindNotFound: the object, or the workspace path, does not exist.
	KindNotFound Kind = "NotFound"
	// KindInvalid: the request or the spec was refused as invalid.
	KindInvalid Kind = "Invalid"
	// KindConflict: the object exists already, or changed meanwhile.
	KindConflict Kind = "Conflict"
	// KindFailed: the object failed (phase Failed), or the server erred.
	KindFailed Kind = "Failed"
)

// Error is an error of this package: its Kind, and the Reason the
// controller's condition or the access API gave (a Kubernetes reason
// otherwise).
type Error struct {
	Kind    Kind
	Reason  string
	Message string
	Err     error
}

func (e *Error) Error() string {
	if e.Reason != "" {
		return fmt.Sprintf("%s (%s)", e.Message, e.Reason)
	}
	return e.Message
}

// Unwrap is the error this one was made from.
func (e *Error) Unwrap() error { return e.Err }

func kindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return ""
}

// IsNotReady tells whether err says the sandbox is not Ready, or the
// access API not served now: try again later.
func IsNotReady(err error) bool { return kindOf(err) == KindNotReady }

// IsTimedOut tells whether err says a deadline passed.
func IsTimedOut(err error) bool { return kindOf(err) == KindTimedOut }

// IsForbidden tells whether err says the caller may not do this.
func IsForbidden(err error) bool { return kindOf(err) == KindForbidden }

// IsNotFound tells whether err says the object or path does not exist.
func IsNotFound(err error) bool { return kindOf(err) == KindNotFound }

// IsInvalid tells whether err says the request or spec was refused.
func IsInvalid(err error) bool { return kindOf(err) == KindInvalid }

// IsConflict tells whether err says the object exists or changed.
func IsConflict(err error) bool { return kindOf(err) == KindConflict }

// IsFailed tells whether err says the object failed.
func IsFailed(err error) bool { return kindOf(err) == KindFailed }

// ReasonOf is the reason err carries, empty when it carries none.
func ReasonOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

// wrap types an error of the Kubernetes API, the access API or the
// context; what it already typed, or cannot, passes unchanged.
func wrap(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	what := fmt.Sprintf(format, args...)
	if errors.Is(err, context.DeadlineExceeded) {
		return &Error{Kind: KindTimedOut, Reason: "DeadlineExceeded", Message: what + ": " + err.Error(), Err: err}
	}
	var se apierrors.APIStatus
	if !errors.As(err, &se) {
		return fmt.Errorf("%s: %w", what, err)
	}
	st := se.Status()
	reason := string(accessv1.ReasonOf(&st))
	if reason == "" {
		reason = string(st.Reason)
	}
	kind := KindFailed
	switch {
	// A node whose manager is down (per-node mode) holds the sandbox out
	// of reach for now, as a sandbox not Ready yet: try again later.
	case accessv1.Reason(reason) == accessv1.ReasonSandboxNotReady, accessv1.Reason(reason) == accessv1.ReasonNodeUnavailable:
		kind = KindNotReady
	// The API server's own 503: the access API is not served now (its
	// manager starts, restarts or is being upgraded).
	case apierrors.IsServiceUnavailable(err):
		kind = KindNotReady
	case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
		kind = KindForbidden
	case apierrors.IsNotFound(err):
		kind = KindNotFound
	case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsRequestEntityTooLargeError(err):
		kind = KindInvalid
	case apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err):
		kind = KindConflict
	case apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err):
		kind = KindTimedOut
	}
	return &Error{Kind: kind, Reason: reason, Message: what + ": " + st.Message, Err: err}
}
