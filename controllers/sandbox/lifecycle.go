package sandbox

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/controllers/identity"
	"afe.dev/sandbox/controllers/writes"
	"afe.dev/sandbox/internal/naming"
	"afe.dev/sandbox/internal/plan"
	"afe.dev/sandbox/internal/runrefs"
)

// suspendedMessage is the condition message of a suspended sandbox.
const suspendedMessage = "The sandbox is suspended: its container and proxy are stopped, its workspace and network kept; " +
	"a Run of it, or spec.suspend=false, resumes it"

// reconcileLifecycle suspends, resumes or ends the sandbox as its
// lifecycle asks. done is true when the sandbox is not to run (suspended,
// or past its deadline): the other phases are skipped.
func (r *Reconciler) reconcileLifecycle(ctx context.Context, s *sandboxScope) (done bool, res ctrl.Result, err error) {
	sbx := s.sbx
	now := time.Now()
	s.wasSuspended = plan.WasSuspended(&sbx.Status)
	in, decision, err := r.decideLifecycle(ctx, s, now)
	if err != nil {
		return false, ctrl.Result{}, err
	}
	last := in.LastActivity
	s.recheck = decision.Recheck
	switch decision.State {
	case plan.LifecycleDeadlineExceeded:
		return true, ctrl.Result{}, r.stop(ctx, s, afev1.DeadlineExceededReason,
			"The sandbox ran past lifecycle.activeDeadlineSeconds: its container and proxy are stopped and are not started again")
	case plan.LifecycleSuspend:
		if err := r.stop(ctx, s, afev1.SuspendedReason, suspendedMessage); err != nil {
			return true, ctrl.Result{}, err
		}
		if sbx.Status.SuspendedTime == nil {
			t := metav1.NewTime(now)
			sbx.Status.SuspendedTime = &t
			s.suspendedFor = "spec.suspend is true"
			if decision.Idle {
				s.suspendedFor = "it was idle for lifecycle.idleTimeoutSeconds (" + in.IdleTimeout.String() + ")"
			}
			logf.FromContext(ctx).Info("Suspended the sandbox", "why", s.suspendedFor)
		}
		return true, ctrl.Result{RequeueAfter: decision.Recheck}, nil
	}
	if s.wasSuspended {
		// A resume is activity: the idle timer starts again from it.
		last = now
	}
	if in.IdleTimeout > 0 {
		recordActivity(&sbx.Status, last)
	}
	return false, ctrl.Result{}, nil
}

// decideLifecycle is the lifecycle's decision, from the Runs of the
// sandbox, its ticket, its last activity and, when the decision hangs on
// them, the commands running in its container; taken once.
func (r *Reconciler) decideLifecycle(ctx context.Context, s *sandboxScope, now time.Time) (plan.LifecycleInput, plan.Lifecycle, error) {
	sbx := s.sbx
	runs, err := r.runsOf(ctx, sbx)
	if err != nil {
		return plan.LifecycleInput{}, plan.Lifecycle{}, err
	}
	paused, err := r.ticketPaused(ctx, sbx)
	if err != nil {
		return plan.LifecycleInput{}, plan.Lifecycle{}, err
	}
	in := plan.LifecycleInput{
		Suspend:      sbx.Spec.Suspend,
		IdleTimeout:  sbx.Spec.Lifecycle.IdleTimeout(),
		Deadline:     sbx.Spec.Lifecycle.ActiveDeadline(),
		Created:      sbx.CreationTimestamp.Time,
		Paused:       paused,
		Suspended:    s.wasSuspended,
		Busy:         inFlight(runs),
		LastActivity: r.lastActivity(sbx, runs, now),
		Now:          now,
	}
	if in.NeedsCommands() {
		if in.Commands, err = r.runningExecs(ctx, s); err != nil {
			return plan.LifecycleInput{}, plan.Lifecycle{}, err
		}
	}
	decision := plan.SandboxLifecycle(in)
	if decision.Active {
		r.Activity.Saw(string(sbx.UID), now)
		in.LastActivity = now
	}
	return in, decision, nil
}

// resumed records, once the container runs again, that a suspended
// sandbox was resumed.
func (r *Reconciler) resumed(ctx context.Context, s *sandboxScope) {
	if !s.wasSuspended || s.sbx.Status.SuspendedTime == nil {
		return
	}
	s.sbx.Status.SuspendedTime = nil
	logf.FromContext(ctx).Info("Resumed the sandbox")
}

// observeSuspension records the Event of a suspension or a resume once the
// status that states it is written: only one write of it can succeed.
func (r *Reconciler) observeSuspension(s *sandboxScope, before *afev1.Sandbox) {
	sbx := s.sbx
	switch {
	case before.Status.SuspendedTime == nil && sbx.Status.SuspendedTime != nil:
		why := s.suspendedFor
		if why == "" {
			why = "as asked"
		}
		r.Recorder.Eventf(sbx, nil, corev1.EventTypeNormal, afev1.SuspendedReason, "Suspend",
			"Suspended: %s; container and proxy stopped, workspace and network kept", why)
	case before.Status.SuspendedTime != nil && sbx.Status.SuspendedTime == nil && !deletingSandbox(sbx):
		r.Recorder.Eventf(sbx, nil, corev1.EventTypeNormal, afev1.ResumedReason, "Resume",
			"Resumed: container %s runs again", s.containerName())
	}
}

func deletingSandbox(sbx *afev1.Sandbox) bool { return !sbx.DeletionTimestamp.IsZero() }

// recordActivity moves status.lastActivityTime forward to t, rounded up
// to the second the API keeps (so that a restart never suspends early).
func recordActivity(st *afev1.SandboxStatus, t time.Time) {
	if r := t.Truncate(time.Second); r.Before(t) {
		t = r.Add(time.Second)
	}
	if st.LastActivityTime == nil || t.After(st.LastActivityTime.Time) {
		mt := metav1.NewTime(t)
		st.LastActivityTime = &mt
	}
}

// lastActivity is when the sandbox was last seen busy: the record in its
// status (never later than now), the commands seen in its container, the
// ends of its Runs, a resume asked for, and its becoming Ready; at the
// earliest its creation.
func (r *Reconciler) lastActivity(sbx *afev1.Sandbox, runs []afev1.Run, now time.Time) time.Time {
	last := sbx.CreationTimestamp.Time
	later := func(t time.Time) {
		if t.After(now) {
			t = now
		}
		if t.After(last) {
			last = t
		}
	}
	if t := sbx.Status.LastActivityTime; t != nil {
		later(t.Time)
	}
	if t := sbx.Status.ReadyTime; t != nil {
		later(t.Time)
	}
	// A resume asked for in the future is no request: it would keep the
	// sandbox up for ever.
	if t, err := time.Parse(time.RFC3339, sbx.Annotations[afev1.ResumeRequestedAnnotation]); err == nil && t.Before(now.Add(time.Minute)) {
		later(t)
	}
	later(r.Activity.Last(sbx.UID))
	for i := range runs {
		if t := runs[i].Status.CompletionTime; t != nil {
			later(t.Time)
		}
	}
	return last
}

// inFlight is true when one of the Runs is Pending or Running.
func inFlight(runs []afev1.Run) bool {
	for i := range runs {
		if !runs[i].Status.Phase.Terminal() && runs[i].DeletionTimestamp.IsZero() {
			return true
		}
	}
	return false
}

// runsOf lists the Runs that name the sandbox, from the cache.
func (r *Reconciler) runsOf(ctx context.Context, sbx *afev1.Sandbox) ([]afev1.Run, error) {
	list := &afev1.RunList{}
	if err := r.List(ctx, list, client.InNamespace(sbx.Namespace), client.MatchingFields{runrefs.SandboxIndex: sbx.Name}); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// ticketPaused is true when the sandbox's ticket is Paused.
func (r *Reconciler) ticketPaused(ctx context.Context, sbx *afev1.Sandbox) (bool, error) {
	if sbx.Spec.TicketRef == nil || sbx.Spec.TicketRef.Name == "" || sbx.Spec.Lifecycle.IdleTimeout() == 0 {
		return false, nil
	}
	tk := &afev1.Ticket{}
	err := r.Get(ctx, types.NamespacedName{Namespace: sbx.Namespace, Name: sbx.Spec.TicketRef.Name}, tk)
	if err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return tk.Spec.State == afev1.TicketPaused, nil
}

// runningExecs counts the commands running in the sandbox's own container,
// verified by its labels.
func (r *Reconciler) runningExecs(ctx context.Context, s *sandboxScope) (int, error) {
	ct, err := identity.SandboxContainer(ctx, r.Engine, s.id)
	if ct == nil || err != nil {
		return 0, err
	}
	return r.Engine.RunningExecs(ctx, ct.ID)
}

// stop stops the sandbox's container, then its proxy, both verified by
// their labels, and keeps them, the workspace and the network; the
// conditions say why.
func (r *Reconciler) stop(ctx context.Context, s *sandboxScope, reason, message string) error {
	sbx := s.sbx
	for _, c := range []struct{ name, role string }{
		{naming.Container(s.id.Key), afev1.RoleSandbox},
		{naming.Proxy(s.id.Key), afev1.RoleProxy},
	} {
		ct, err := identity.OwnedContainer(ctx, r.Engine, s.id, c.name, c.role)
		if err != nil && !isEngineNotFound(err) {
			return err
		}
		if ct == nil || !ct.Running {
			continue
		}
		logf.FromContext(ctx).Info("Stopping container", "container", c.name, "reason", reason)
		r.Stops.Stopping(ct.ID, time.Now())
		if err := r.Engine.StopContainer(ctx, ct.ID); err != nil && !isEngineNotFound(err) {
			return err
		}
	}
	writes.SetCondition(sbx, afev1.ContainerReadyCondition, false, reason, message)
	if len(sbx.Spec.Egress) > 0 {
		writes.SetCondition(sbx, afev1.EgressReadyCondition, false, reason, message)
	}
	sbx.Status.ObservedGeneration = sbx.Generation
	return nil
}

func isEngineNotFound(err error) bool { return err != nil && identity.IgnoreEngineNotFound(err) == nil }

// sandboxOfRun maps a Run to the Sandbox it names, when that sandbox has a
// lifecycle a Run changes: a new Run resumes a suspended sandbox, and the
// end of one restarts its idle timer. Other sandboxes are not looked at
// for their Runs (a Run costs them no Docker request).
func (r *Reconciler) sandboxOfRun(ctx context.Context, o client.Object) []ctrl.Request {
	run, ok := o.(*afev1.Run)
	if !ok {
		return nil
	}
	key := types.NamespacedName{Namespace: run.Namespace, Name: run.Spec.SandboxRef.Name}
	sbx := &afev1.Sandbox{}
	if err := r.Get(ctx, key, sbx); err != nil ||
		sbx.Spec.Lifecycle.IdleTimeout() == 0 && !plan.WasSuspended(&sbx.Status) {
		return nil
	}
	return []ctrl.Request{{NamespacedName: key}}
}
