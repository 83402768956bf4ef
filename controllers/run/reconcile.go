package run

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/controllers/identity"
	"afe.dev/sandbox/controllers/writes"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/placement"
	"afe.dev/sandbox/internal/sandboxspec"
)

// Reconcile starts a Run when its sandbox is Ready, and records its
// outcome, in the shape of every kind: fetch, the per-node gate (here),
// delete or normal (the finalizer first), and one commit of the status
// with what follows it (scope.go). The one write before the end is the
// attempt's (commitAttempt): an attempt starts only once it is counted,
// and is forgotten only once its outcome is written.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	run := &afev1.Run{}
	if err := r.Get(ctx, req.NamespacedName, run); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	s := &runScope{run: run, before: run.DeepCopy()}
	err := r.reconcile(ctx, s)
	if err == nil {
		// A Run that failed half-way is not written: what it computed may
		// be half of an outcome.
		err = r.commit(ctx, s)
	}
	if err == nil && run.Status.Phase.Terminal() {
		return r.expire(ctx, run)
	}
	// A Conflict: this reconcile read a stale copy (a Run the cache still
	// shows Running may have ended); it looks again once the cache holds the
	// newer one, rather than act on the old one.
	return writes.ReconcileResult(ctrl.Result{RequeueAfter: s.requeue}, err, nil)
}

func (r *Reconciler) reconcile(ctx context.Context, s *runScope) error {
	run := s.run
	if run.Status.Phase.Terminal() {
		r.execs.forget(run.UID)
		return r.removeFinalizer(ctx, run)
	}
	if here, err := r.here(ctx, run); err != nil || !here {
		return err
	}
	if !run.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, run)
	}
	if err := writes.EnsureFinalizer(ctx, r.Client, run, afev1.RunFinalizer); err != nil {
		return err
	}
	s.before = run.DeepCopy()
	return r.reconcileNormal(ctx, s)
}

// reconcileNormal records the outcome of the attempt that ended, or starts
// one when the sandbox is Ready and has a slot free.
func (r *Reconciler) reconcileNormal(ctx context.Context, s *runScope) error {
	run := s.run
	if a := r.execs.get(run.UID); a != nil {
		if !a.done.Load() {
			return nil // in flight; its end brings the Run back
		}
		if !a.outcome.lost && !a.outcome.abandoned {
			// Kept until the outcome is written: a stale read retries it.
			s.forgetAttempt = true
			return r.finish(ctx, s, a)
		}
		r.execs.forget(run.UID)
	}
	sbx, ct, err := r.readySandbox(ctx, s)
	if sbx == nil {
		return err
	}
	queue, err := r.queueOf(ctx, run)
	if err != nil {
		return err
	}
	limit := r.Config.MaxRunsPerSandboxOrDefault()
	if !r.execs.admit(run, sbx.UID, limit, queue) {
		r.waitForSlot(s, limit)
		return nil
	}
	started := false
	defer func() {
		if !started {
			r.execs.forget(run.UID) // the reservation
		}
	}()
	err = r.start(ctx, s, sbx, ct)
	a := r.execs.get(run.UID)
	started = a != nil && a.cancel != nil
	return err
}

// readySandbox is the Sandbox the Run starts in and its running container,
// or nil when the Run waits for them or has failed without them (its
// status then says which).
func (r *Reconciler) readySandbox(ctx context.Context, s *runScope) (*afev1.Sandbox, *docker.Container, error) {
	run := s.run
	sbx := &afev1.Sandbox{}
	err := r.Get(ctx, types.NamespacedName{Namespace: run.Namespace, Name: run.Spec.SandboxRef.Name}, sbx)
	switch {
	case apierrors.IsNotFound(err):
		sbx = nil
	case err != nil:
		return nil, nil, err
	}
	var finished *afev1.Ticket
	if sbx == nil || !sbx.DeletionTimestamp.IsZero() {
		if finished, err = r.finishedTicketOf(ctx, run); err != nil {
			return nil, nil, err
		}
	}
	if g := sandboxGate(run, sbx, finished); g.message != "" {
		if g.fail {
			return nil, nil, r.fail(ctx, s, g.reason, g.message)
		}
		if g.reason != "" {
			return nil, nil, r.waitFor(s, g.reason, g.message)
		}
		return nil, nil, r.wait(s, g.message)
	}
	// The container is the one derived from the Sandbox's namespace, name
	// and UID, verified by its labels; never one a status names.
	ct, err := identity.SandboxContainer(ctx, r.Engine, sandboxspec.IdentityOf(sbx, r.Config.Instance))
	switch {
	case err != nil:
		return nil, nil, err
	case ct == nil:
		return nil, nil, r.wait(s, fmt.Sprintf("Sandbox %s has no running container yet", sbx.Name))
	case r.Stops.Stopped(ct.ID, time.Now()):
		// Its Ready condition is older than the stop this manager began.
		return nil, nil, r.wait(s, fmt.Sprintf("Sandbox %s is being stopped", sbx.Name))
	}
	return sbx, ct, nil
}

// gate is what a Run does about its sandbox before it starts: go on (no
// message), wait with the message (and the reason, when it is more than
// SandboxNotReady), or fail with the reason and message.
type gate struct {
	fail            bool
	reason, message string
}

// sandboxGate decides what the Run does about its sandbox (nil: none of
// the name) before it starts: finished is the ticket of a sandbox that is
// gone or going, when that ticket has finished.
func sandboxGate(run *afev1.Run, sbx *afev1.Sandbox, finished *afev1.Ticket) gate {
	gone := sbx == nil || !sbx.DeletionTimestamp.IsZero()
	switch {
	case gone && finished != nil:
		return gate{fail: true, reason: afev1.TicketFinishedReason, message: fmt.Sprintf("Ticket %s finished before the Run could end", finished.Name)}
	case sbx == nil && run.Status.Attempts == 0:
		return gate{message: fmt.Sprintf("Sandbox %s does not exist yet", run.Spec.SandboxRef.Name)}
	case gone:
		return gate{fail: true, reason: afev1.SandboxDeletedReason, message: fmt.Sprintf("Sandbox %s was deleted before the Run could end", run.Spec.SandboxRef.Name)}
	}
	switch reason := sandboxReadyReason(sbx); {
	case reason == afev1.DeadlineExceededReason:
		return gate{fail: true, reason: reason, message: fmt.Sprintf("Sandbox %s ran past its lifecycle.activeDeadlineSeconds", sbx.Name)}
	case reason == afev1.SuspendedReason && !sbx.Spec.Suspend:
		return gate{message: fmt.Sprintf("Sandbox %s is suspended and is resumed for the Run", sbx.Name)}
	case reason == afev1.SuspendedReason:
		return gate{message: fmt.Sprintf("Sandbox %s is suspended (spec.suspend); the Run starts once it is resumed", sbx.Name)}
	case envRefused[reason]:
		// Its env cannot be resolved: the Run says why, as it does when it
		// finds so itself (waitForEnv).
		return gate{reason: reason, message: envMessage(sbx.Name, readyMessage(sbx))}
	case !meta.IsStatusConditionTrue(sbx.Status.Conditions, afev1.SandboxReadyCondition):
		return gate{message: fmt.Sprintf("Sandbox %s is not Ready", sbx.Name)}
	}
	return gate{}
}

// here is the per-node gate (--per-node): this manager acts on the Run
// when its Sandbox is placed on this node, or when it already executes it.
// A Run whose Sandbox does not exist, or has no Ticket (never placed), is
// alike for every manager: it waits or ends the same way whoever writes it.
func (r *Reconciler) here(ctx context.Context, run *afev1.Run) (bool, error) {
	if !r.Config.PerNode || r.execs.get(run.UID) != nil {
		return true, nil
	}
	sbx := &afev1.Sandbox{}
	err := r.Get(ctx, types.NamespacedName{Namespace: run.Namespace, Name: run.Spec.SandboxRef.Name}, sbx)
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	here, ticketed, err := placement.SandboxHere(ctx, r.Client, r.Config.Instance, r.Config.PlacementKey, sbx)
	return here || !ticketed, err
}
