package run

import (
	"context"
	"time"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/controllers/writes"
)

// runScope is what one reconcile of a Run works with.
type runScope struct {
	run *afev1.Run
	// before is the Run as last written, the base of status patches.
	before *afev1.Run
	// after are the Events and metrics of what the status states, done
	// once it is written, so that a write retried after a conflict does
	// not repeat them.
	after []func()
	// ended: the Run's end is being written; its finalizer goes after.
	ended bool
	// forgetAttempt: the attempt whose outcome is being written is
	// forgotten once it is.
	forgetAttempt bool
	// requeue is when the Run is looked at again without an event (a slot
	// of its sandbox awaited).
	requeue time.Duration
}

// afterWrite queues f for once the status is written.
func (s *runScope) afterWrite(f func()) { s.after = append(s.after, f) }

// commit writes the status when it changed, over the version the reconcile
// read (the lock refuses a write based on a stale copy: an ended Run is
// never started again from an old cache), then does what follows the
// write: the queued Events and metrics (only after a write), the removal
// of the finalizer of a Run that ended, and forgetting its attempt.
func (r *Reconciler) commit(ctx context.Context, s *runScope) error {
	written, err := writes.PatchStatus(ctx, r.Client, s.before, s.run, afev1.RunFinalizer,
		func(o *afev1.Run) any { return o.Status })
	if err != nil {
		return err
	}
	if written {
		s.before = s.run.DeepCopy()
		for _, f := range s.after {
			f()
		}
	}
	s.after = nil
	// A status already as stated (written by an earlier try) still ends
	// the Run: its finalizer and attempt go all the same.
	if s.ended {
		if err := r.removeFinalizer(ctx, s.run); err != nil {
			return err
		}
	}
	if s.forgetAttempt {
		r.execs.forget(s.run.UID)
	}
	return nil
}

// commitAttempt is the commit that must come before an action: the
// attempt is written to the status before its command starts, so that a
// crash in between is counted and the Run is executed again after the
// restart.
func (r *Reconciler) commitAttempt(ctx context.Context, s *runScope) error {
	return r.commit(ctx, s)
}

func (r *Reconciler) removeFinalizer(ctx context.Context, run *afev1.Run) error {
	_, err := writes.RemoveFinalizer(ctx, r.Client, run, afev1.RunFinalizer)
	return err
}
