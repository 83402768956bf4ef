// Package run executes Runs in their sandbox containers: the slots of a
// sandbox, the attempts, their containment (the kill at a deadline and the
// sweep after an end), snapshots and the built-in Runs.
package run

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/controllers/shared"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/builtin"
	"afe.dev/sandbox/internal/metrics"
	"afe.dev/sandbox/internal/plan"
	"afe.dev/sandbox/internal/runexec"
	"afe.dev/sandbox/internal/sandboxspec"
	"afe.dev/sandbox/internal/ticketspec"
)

// Reconciler executes Runs in their sandbox containers.
type Reconciler struct {
	client.Client
	Engine   Engine
	Recorder events.EventRecorder
	Config   shared.Config
	// Stops are the containers this manager stopped (a suspension): a
	// command that ends under one is interrupted, not completed.
	Stops *shared.StopLog

	// execs are the attempts this process runs; SetupWithManager makes it.
	execs *executions
}

// +kubebuilder:rbac:groups=sandbox.afe.dev,resources=runs,verbs=get;list;watch;update;patch;delete
// +kubebuilder:rbac:groups=sandbox.afe.dev,resources=runs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=sandbox.afe.dev,resources=runs/finalizers,verbs=update

// Reconcile starts a Run when its sandbox is Ready, and records its outcome.
// Unlike a Sandbox's or a Ticket's, a Run's status is written where it is
// decided, before what follows it: an attempt starts only once it is
// counted, and is forgotten only once its outcome is written.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	run := &afev1.Run{}
	if err := r.Get(ctx, req.NamespacedName, run); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	err := r.reconcile(ctx, run.DeepCopy(), run)
	if errors.Is(err, errNoSlot) {
		return ctrl.Result{RequeueAfter: slotRetry}, nil
	}
	if err == nil && run.Status.Phase.Terminal() {
		return r.expire(ctx, run)
	}
	// A Conflict: this reconcile read a stale copy (a Run the cache still
	// shows Running may have ended); it looks again once the cache holds the
	// newer one, rather than act on the old one.
	return shared.ReconcileResult(ctrl.Result{}, err, nil)
}

func (r *Reconciler) reconcile(ctx context.Context, before, run *afev1.Run) error {
	if run.Status.Phase.Terminal() {
		r.execs.forget(run.UID)
		return r.removeFinalizer(ctx, run)
	}
	if r.Config.PerNode && r.execs.get(run.UID) == nil {
		if here, err := r.placedHere(ctx, run); err != nil || !here {
			return err
		}
	}
	if !run.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, run)
	}
	if err := shared.EnsureFinalizer(ctx, r.Client, run, afev1.RunFinalizer); err != nil {
		return err
	}
	*before = *run.DeepCopy()

	if a := r.execs.get(run.UID); a != nil {
		if !a.done.Load() {
			return nil // in flight; its end brings the Run back
		}
		if !a.outcome.lost && !a.outcome.abandoned {
			// Kept until the outcome is written: a stale read retries it.
			if err := r.finish(ctx, before, run, a); err != nil {
				return err
			}
			r.execs.forget(run.UID)
			return nil
		}
		r.execs.forget(run.UID)
	}

	sbx := &afev1.Sandbox{}
	err := r.Get(ctx, types.NamespacedName{Namespace: run.Namespace, Name: run.Spec.SandboxRef.Name}, sbx)
	if apierrors.IsNotFound(err) || err == nil && !sbx.DeletionTimestamp.IsZero() {
		if tk, terr := r.finishedTicketOf(ctx, run); terr != nil {
			return terr
		} else if tk != nil {
			return r.fail(ctx, before, run, afev1.TicketFinishedReason,
				fmt.Sprintf("Ticket %s finished before the Run could end", tk.Name))
		}
	}
	switch {
	case apierrors.IsNotFound(err) && run.Status.Attempts == 0:
		return r.wait(ctx, before, run, fmt.Sprintf("Sandbox %s does not exist yet", run.Spec.SandboxRef.Name))
	case apierrors.IsNotFound(err) || err == nil && !sbx.DeletionTimestamp.IsZero():
		return r.fail(ctx, before, run, afev1.SandboxDeletedReason,
			fmt.Sprintf("Sandbox %s was deleted before the Run could end", run.Spec.SandboxRef.Name))
	case err != nil:
		return err
	case sandboxReadyReason(sbx) == afev1.DeadlineExceededReason:
		return r.fail(ctx, before, run, afev1.DeadlineExceededReason,
			fmt.Sprintf("Sandbox %s ran past its lifecycle.activeDeadlineSeconds", sbx.Name))
	case sandboxReadyReason(sbx) == afev1.SuspendedReason && !sbx.Spec.Suspend:
		return r.wait(ctx, before, run, fmt.Sprintf("Sandbox %s is suspended and is resumed for the Run", sbx.Name))
	case sandboxReadyReason(sbx) == afev1.SuspendedReason:
		return r.wait(ctx, before, run, fmt.Sprintf("Sandbox %s is suspended (spec.suspend); the Run starts once it is resumed", sbx.Name))
	case !meta.IsStatusConditionTrue(sbx.Status.Conditions, afev1.SandboxReadyCondition):
		return r.wait(ctx, before, run, fmt.Sprintf("Sandbox %s is not Ready", sbx.Name))
	}
	// The container is the one derived from the Sandbox's namespace, name
	// and UID, verified by its labels; never one a status names.
	ct, err := shared.SandboxContainer(ctx, r.Engine, sandboxspec.IdentityOf(sbx, r.Config.Instance))
	if err != nil {
		return err
	}
	if ct == nil {
		return r.wait(ctx, before, run, fmt.Sprintf("Sandbox %s has no running container yet", sbx.Name))
	}
	if r.Stops.Stopped(ct.ID, time.Now()) {
		// Its Ready condition is older than the stop this manager began.
		return r.wait(ctx, before, run, fmt.Sprintf("Sandbox %s is being stopped", sbx.Name))
	}
	queue, err := r.queueOf(ctx, run)
	if err != nil {
		return err
	}
	limit := r.Config.MaxRunsPerSandboxOrDefault()
	if !r.execs.admit(run, sbx.UID, limit, queue) {
		return r.waitForSlot(ctx, before, run, limit)
	}
	started := false
	defer func() {
		if !started {
			r.execs.forget(run.UID) // the reservation
		}
	}()
	err = r.start(ctx, before, run, sbx, ct)
	a := r.execs.get(run.UID)
	started = a != nil && a.cancel != nil
	return err
}

// start begins a new attempt. The attempt is written to the status before
// the command starts, so that a crash in between is counted and the Run is
// executed again after the restart.
func (r *Reconciler) start(ctx context.Context, before, run *afev1.Run, sbx *afev1.Sandbox, ct *docker.Container) error {
	log := logf.FromContext(ctx)
	// The sandbox's user is checked here too: the Sandbox read may be newer
	// than its Ready condition, and the kill runs with the sandbox's group.
	vopts, err := r.Config.Validation()
	if err != nil {
		return err
	}
	uid, sandboxGID, err := sandboxspec.ValidateContainerUser(sbx.Spec.User, ct, vopts)
	if ie, ok := sandboxspec.AsInvalid(err); ok {
		return r.fail(ctx, before, run, ie.Reason, "The sandbox's user is refused: "+ie.Message)
	}
	var job *snapshotJob
	switch run.Spec.Builtin {
	case afev1.BuiltinMergeAndCI:
		if err := builtin.MergeOf(run).Validate(); err != nil {
			return r.fail(ctx, before, run, afev1.InvalidSpecReason, "The Run's spec is invalid: "+err.Error())
		}
	case afev1.BuiltinSnapshot:
		if job, err = r.snapshotJobOf(ctx, sbx); err != nil {
			if _, ok := sandboxspec.AsInvalid(err); !ok && !errors.Is(err, docker.ErrNotFound) {
				return err
			}
			return r.fail(ctx, before, run, afev1.SnapshotFailedReason, "The sandbox's workspace cannot be copied: "+err.Error())
		}
		job.user = fmt.Sprintf("%d:%d", uid, sandboxGID)
	}
	if run.Status.Phase == afev1.RunRunning && run.Status.Attempts > 0 {
		// In flight when the controller stopped: nothing of that attempt
		// survives into the next one (or into the Run's end).
		prev := &attempt{container: ct.Name, containerID: ct.ID, gid: runexec.GID(string(run.UID), run.Status.Attempts), sandboxGID: sandboxGID}
		log.Info("Stopping what is left of an interrupted Run attempt", "attempt", run.Status.Attempts)
		if r.endAttempt(ctx, prev, uid) {
			return r.wait(ctx, before, run, fmt.Sprintf("Sandbox %s is recreated: processes of an interrupted attempt survived every kill", sbx.Name))
		}
	}
	if limit := run.Spec.MaxAttemptsOrDefault(); run.Status.Attempts >= limit {
		return r.fail(ctx, before, run, afev1.AttemptsExhaustedReason, fmt.Sprintf(
			"The Run was started %d times and no attempt reached an outcome (each was cut short by a restart of the "+
				"controller or a loss of the sandbox); maxAttempts is %d", run.Status.Attempts, limit))
	}

	timeout := time.Duration(sbx.Spec.TimeoutSeconds) * time.Second
	if run.Spec.TimeoutSeconds != nil {
		timeout = time.Duration(*run.Spec.TimeoutSeconds) * time.Second
	}
	if timeout <= 0 {
		timeout = 600 * time.Second
	}
	a := &attempt{
		sandbox:     sbx.UID,
		number:      run.Status.Attempts + 1,
		container:   ct.Name,
		containerID: ct.ID,
		sandboxGID:  sandboxGID,
		snapshot:    job,
		cpuSeconds:  sbx.Spec.Resources.CPUSeconds,
		ticket:      sandboxspec.IdentityOf(sbx, r.Config.Instance).Ticket,
	}

	a.gid = runexec.GID(string(run.UID), a.number)

	now := metav1.Now()
	run.Status.Phase = afev1.RunRunning
	run.Status.Attempts = a.number
	run.Status.StartTime = &now
	run.Status.ContainerID = a.containerID
	shared.SetCondition(run, afev1.RunSandboxReadyCondition, true, afev1.ReadyReason, "Sandbox "+sbx.Name+" is Ready")
	shared.SetCondition(run, afev1.RunCompletedCondition, false, afev1.RunningReason,
		fmt.Sprintf("Attempt %d is running in %s", a.number, a.container))
	if err := r.patchStatus(ctx, before, run); err != nil {
		return err
	}

	log.Info("Starting Run", "attempt", a.number, "container", a.container, "timeout", timeout)
	copied := run.DeepCopy()
	r.execs.start(run.UID, a, func(execCtx context.Context) {
		r.execute(logf.IntoContext(execCtx, log), copied, a, uid, timeout)
	})
	r.Recorder.Eventf(run, nil, corev1.EventTypeNormal, "Started", "Execute", "Attempt %d started in container %s", a.number, a.container)
	r.Recorder.Eventf(sbx, run, corev1.EventTypeNormal, "RunStarted", "Execute", "Run %s started (attempt %d)", run.Name, a.number)
	return nil
}

// finish records the outcome of the last attempt, as plan.RunOutcome maps
// it.
func (r *Reconciler) finish(ctx context.Context, before, run *afev1.Run, a *attempt) error {
	o := a.outcome
	// The attempt's record is committed before its end is: a Run said
	// ended is in the telemetry, whenever the manager stops after. A store
	// that cannot commit (a full disk) is logged, and does not hold the
	// Run's end back.
	if store := r.Config.Telemetry; store != nil {
		fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if err := store.Flush(fctx); err != nil {
			logf.FromContext(ctx).Error(err, "The telemetry store did not commit the Run's record")
		}
		cancel()
	}
	end := plan.RunOutcome(plan.AttemptEnd{
		ExitCode: o.exitCode, TimedOut: o.timedOut, ContainerKilled: o.containerKilled,
		ExecErr: o.execErr, FailReason: o.failReason, FailMessage: o.failMessage,
		Duration: o.finished.Sub(o.started), CPUSeconds: a.cpuSeconds, ResultRefused: o.resultRefused,
	})
	if end.ExitCode != nil {
		run.Status.ExitCode = end.ExitCode
	}
	if end.Output {
		run.Status.Output, run.Status.OutputTruncated = o.output, ptr.To(o.truncated)
	}
	if end.Phase == afev1.RunFailed {
		return r.fail(ctx, before, run, end.Reason, end.Message)
	}
	if o.snapshot != "" {
		// Recorded on the Sandbox before the Run ends: a crash in between
		// executes the Run again, which makes the same snapshot again.
		if err := r.recordSnapshot(ctx, run, o.snapshot, metav1.NewTime(o.finished)); err != nil {
			return fmt.Errorf("record snapshot %s on sandbox %s: %w", o.snapshot, run.Spec.SandboxRef.Name, err)
		}
	}
	timedOut := end.Phase == afev1.RunTimedOut
	completed := metav1.NewTime(o.finished)
	run.Status.OK = ptr.To(end.OK)
	run.Status.TimedOut = ptr.To(timedOut)
	run.Status.CompletionTime = &completed
	run.Status.DurationMilliseconds = o.finished.Sub(o.started).Milliseconds()
	run.Status.Result = nil
	if o.result != nil {
		run.Status.Result = make(map[string]apiextensionsv1.JSON, len(o.result))
		for k, v := range o.result {
			run.Status.Result[k] = apiextensionsv1.JSON{Raw: v}
		}
	}
	run.Status.Phase = end.Phase
	shared.SetCondition(run, afev1.RunCompletedCondition, true, end.Reason, end.Message)
	if err := r.patchStatus(ctx, before, run); err != nil {
		return err
	}
	// Recorded once the outcome is written, so that a retried write does
	// not repeat them.
	sbx := &afev1.Sandbox{}
	sbxErr := r.Get(ctx, types.NamespacedName{Namespace: run.Namespace, Name: run.Spec.SandboxRef.Name}, sbx)
	if timedOut {
		r.Recorder.Eventf(run, nil, corev1.EventTypeWarning, afev1.TimedOutReason, "Execute", end.Message)
		if sbxErr == nil {
			r.Recorder.Eventf(sbx, run, corev1.EventTypeWarning, "RunTimedOut", "Execute", "Run %s timed out and was killed", run.Name)
		}
	} else {
		r.Recorder.Eventf(run, nil, corev1.EventTypeNormal, "Completed", "Execute", end.Message)
		if sbxErr == nil {
			r.Recorder.Eventf(sbx, run, corev1.EventTypeNormal, "RunCompleted", "Execute", "Run %s exited with code %d after %dms",
				run.Name, *end.ExitCode, run.Status.DurationMilliseconds)
		}
	}
	metrics.RunDuration.WithLabelValues(string(run.Status.Phase)).Observe(o.finished.Sub(o.started).Seconds())
	metrics.Runs.WithLabelValues(string(run.Status.Phase), strconv.FormatBool(run.Status.Succeeded())).Inc()
	return r.removeFinalizer(ctx, run)
}

// wait keeps the Run Pending while its sandbox is missing or not Ready; the
// sandbox's changes bring it back.
func (r *Reconciler) wait(ctx context.Context, before, run *afev1.Run, message string) error {
	run.Status.Phase = afev1.RunPending
	shared.SetCondition(run, afev1.RunSandboxReadyCondition, false, afev1.SandboxNotReadyReason, message)
	shared.SetCondition(run, afev1.RunCompletedCondition, false, afev1.SandboxNotReadyReason, "Waiting for the sandbox")
	return r.patchStatus(ctx, before, run)
}

// fail ends a Run that could not be executed.
func (r *Reconciler) fail(ctx context.Context, before, run *afev1.Run, reason, message string) error {
	if err := r.discardSnapshot(ctx, run); err != nil {
		return err
	}
	now := metav1.Now()
	run.Status.Phase = afev1.RunFailed
	run.Status.CompletionTime = &now
	// Present once ended, so that `.status.ok == false` holds for it.
	run.Status.OK, run.Status.TimedOut = ptr.To(false), ptr.To(false)
	if run.Status.OutputTruncated == nil {
		run.Status.OutputTruncated = ptr.To(false)
	}
	if run.Status.ExitCode == nil {
		run.Status.ExitCode = ptr.To(int32(-1))
	}
	shared.SetCondition(run, afev1.RunCompletedCondition, true, reason, message)
	if err := r.patchStatus(ctx, before, run); err != nil {
		return err
	}
	r.Recorder.Eventf(run, nil, corev1.EventTypeWarning, reason, "Execute", message)
	metrics.Runs.WithLabelValues(string(afev1.RunFailed), "false").Inc()
	return r.removeFinalizer(ctx, run)
}

// reconcileDelete stops a Run that is being deleted: its processes are
// killed before the finalizer goes.
func (r *Reconciler) reconcileDelete(ctx context.Context, run *afev1.Run) error {
	if a := r.execs.get(run.UID); a != nil && !a.done.Load() {
		sbx := &afev1.Sandbox{}
		if err := r.Get(ctx, types.NamespacedName{Namespace: run.Namespace, Name: run.Spec.SandboxRef.Name}, sbx); err == nil {
			if vopts, err := r.Config.Validation(); err == nil {
				ct, err := r.Engine.InspectContainer(ctx, a.containerID)
				if err == nil && sandboxspec.IdentityOf(sbx, r.Config.Instance).OwnsAs(ct.Labels, afev1.RoleSandbox) {
					if uid, _, err := sandboxspec.ValidateContainerUser(sbx.Spec.User, ct, vopts); err == nil {
						r.kill(ctx, a, uid)
					}
				}
			}
		}
		a.cancel()
	}
	r.execs.forget(run.UID)
	if err := r.discardSnapshot(ctx, run); err != nil {
		return err
	}
	return r.removeFinalizer(ctx, run)
}

func (r *Reconciler) removeFinalizer(ctx context.Context, run *afev1.Run) error {
	_, err := shared.RemoveFinalizer(ctx, r.Client, run, afev1.RunFinalizer)
	return err
}

// patchStatus writes the status when it changed. The lock refuses a write
// based on a stale copy: an ended Run is never started again from an old
// cache. before becomes the version written, the base of the next write.
func (r *Reconciler) patchStatus(ctx context.Context, before, run *afev1.Run) error {
	written, err := shared.PatchStatus(ctx, r.Client, before, run, afev1.RunFinalizer,
		func(o *afev1.Run) any { return o.Status })
	if written {
		*before = *run.DeepCopy()
	}
	return err
}

// SetupWithManager registers the reconciler: Runs, the Sandboxes they name,
// and the ends of attempts.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	r.execs = newExecutions(ctx)
	if err := mgr.GetFieldIndexer().IndexField(ctx, &afev1.Run{}, shared.RunSandboxIndex, func(o client.Object) []string {
		return []string{o.(*afev1.Run).Spec.SandboxRef.Name}
	}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&afev1.Run{}, builder.WithPredicates(shared.SpecOrDeletionChanged(nil))).
		Watches(&afev1.Sandbox{}, handler.EnqueueRequestsFromMapFunc(r.runsOfSandbox)).
		Watches(&afev1.Ticket{}, handler.EnqueueRequestsFromMapFunc(r.runsOfTicket)).
		WatchesRawSource(r.execs.source()).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(1, r.Config.MaxConcurrentReconciles)}).
		Named("run").
		Complete(r)
}

// finishedTicketOf is the ticket whose sandbox the Run names, when that
// ticket is finished or being deleted.
func (r *Reconciler) finishedTicketOf(ctx context.Context, run *afev1.Run) (*afev1.Ticket, error) {
	tickets, err := shared.FinishingTicketsOf(ctx, r.Client, run)
	if err != nil || len(tickets) == 0 {
		return nil, err
	}
	return tickets[0], nil
}

// runsOfTicket maps a Ticket to the unfinished Runs of its sandboxes.
func (r *Reconciler) runsOfTicket(ctx context.Context, o client.Object) []reconcile.Request {
	var reqs []reconcile.Request
	for _, s := range ticketspec.Sandboxes(o.(*afev1.Ticket)) {
		reqs = append(reqs, r.runsOfSandbox(ctx, &s)...)
	}
	return reqs
}

// runsOfSandbox maps a Sandbox to the unfinished Runs that name it.
func (r *Reconciler) runsOfSandbox(ctx context.Context, o client.Object) []reconcile.Request {
	list := &afev1.RunList{}
	if err := r.List(ctx, list, client.InNamespace(o.GetNamespace()), client.MatchingFields{shared.RunSandboxIndex: o.GetName()}); err != nil {
		logf.FromContext(ctx).Error(err, "List the Runs of a sandbox")
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		if !list.Items[i].Status.Phase.Terminal() {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return reqs
}

// sandboxReadyReason is the reason of the sandbox's Ready condition.
func sandboxReadyReason(sbx *afev1.Sandbox) string {
	if c := meta.FindStatusCondition(sbx.Status.Conditions, afev1.SandboxReadyCondition); c != nil {
		return c.Reason
	}
	return ""
}

// expire deletes an ended Run once its ttlSecondsAfterFinished (or
// --finished-ttl) has passed since its completionTime.
func (r *Reconciler) expire(ctx context.Context, run *afev1.Run) (ctrl.Result, error) {
	ttl, ok := shared.FinishedTTL(run.Spec.TTLSecondsAfterFinished, r.Config.FinishedTTL)
	if !ok || !run.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	end := run.CreationTimestamp.Time
	if run.Status.CompletionTime != nil {
		end = run.Status.CompletionTime.Time
	}
	if left := time.Until(end.Add(ttl)); left > 0 {
		return ctrl.Result{RequeueAfter: left}, nil
	}
	logf.FromContext(ctx).Info("Deleting the ended Run: its ttlSecondsAfterFinished passed", "ttl", ttl)
	return ctrl.Result{}, shared.DeleteExpired(ctx, r.Client, run)
}

// placedHere is true when, in per-node mode, this manager executes the Run:
// its Sandbox is placed on this node. A Run whose Sandbox does not exist,
// or has no Ticket (never placed), is alike for every manager: it waits or
// ends the same way whoever writes it.
func (r *Reconciler) placedHere(ctx context.Context, run *afev1.Run) (bool, error) {
	sbx := &afev1.Sandbox{}
	err := r.Get(ctx, types.NamespacedName{Namespace: run.Namespace, Name: run.Spec.SandboxRef.Name}, sbx)
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	placed, ticketed, err := shared.PlacedHere(ctx, r.Client, r.Config.Instance, sbx)
	return placed || !ticketed, err
}
