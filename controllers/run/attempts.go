package run

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/controllers/writes"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/builtin"
	"afe.dev/sandbox/internal/metrics"
	"afe.dev/sandbox/internal/plan"
	"afe.dev/sandbox/internal/runexec"
	"afe.dev/sandbox/internal/sandboxspec"
)

// start begins a new attempt, once the sandbox's user, the Run's spec and
// what is left of an interrupted attempt allow it.
func (r *Reconciler) start(ctx context.Context, s *runScope, sbx *afev1.Sandbox, ct *docker.Container) error {
	run := s.run
	log := logf.FromContext(ctx)
	// The sandbox's user is checked here too: the Sandbox read may be newer
	// than its Ready condition, and the kill runs with the sandbox's group.
	vopts, err := r.Config.Validation()
	if err != nil {
		return err
	}
	uid, sandboxGID, err := sandboxspec.ValidateContainerUser(sbx.Spec.User, ct, vopts)
	if ie, ok := sandboxspec.AsInvalid(err); ok {
		return r.fail(ctx, s, ie.Reason, "The sandbox's user is refused: "+ie.Message)
	}
	env, err := r.attemptEnv(ctx, run, sbx)
	if ie, ok := sandboxspec.AsInvalid(err); ok {
		return r.waitForEnv(s, sbx, ie)
	}
	if err != nil {
		return err
	}
	job, failed, err := r.builtinJob(ctx, s, sbx, fmt.Sprintf("%d:%d", uid, sandboxGID))
	if failed || err != nil {
		return err
	}
	if run.Status.Phase == afev1.RunRunning && run.Status.Attempts > 0 {
		// In flight when the controller stopped: nothing of that attempt
		// survives into the next one (or into the Run's end).
		prev := &attempt{container: ct.Name, containerID: ct.ID, gid: runexec.GID(string(run.UID), run.Status.Attempts), sandboxGID: sandboxGID}
		log.Info("Stopping what is left of an interrupted Run attempt", "attempt", run.Status.Attempts)
		if r.endAttempt(ctx, prev, uid) {
			return r.wait(s, fmt.Sprintf("Sandbox %s is recreated: processes of an interrupted attempt survived every kill", sbx.Name))
		}
	}
	if limit := run.Spec.MaxAttemptsOrDefault(); run.Status.Attempts >= limit {
		return r.fail(ctx, s, afev1.AttemptsExhaustedReason, fmt.Sprintf(
			"The Run was started %d times and no attempt reached an outcome (each was cut short by a restart of the "+
				"controller or a loss of the sandbox); maxAttempts is %d", run.Status.Attempts, limit))
	}

	a := &attempt{
		sandbox:     sbx.UID,
		number:      run.Status.Attempts + 1,
		container:   ct.Name,
		containerID: ct.ID,
		sandboxGID:  sandboxGID,
		env:         env,
		snapshot:    job,
		cpuSeconds:  sbx.Spec.Resources.CPUSeconds,
		ticket:      sandboxspec.IdentityOf(sbx, r.Config.Instance).Ticket,
	}
	a.gid = runexec.GID(string(run.UID), a.number)
	return r.begin(ctx, s, sbx, a, uid)
}

// builtinJob checks a built-in Run before its attempt (a merge's spec, a
// snapshot's workspace) and returns a snapshot's copy job, made as user;
// failed is true when the Run failed on it, its status saying why.
func (r *Reconciler) builtinJob(ctx context.Context, s *runScope, sbx *afev1.Sandbox, user string) (*snapshotJob, bool, error) {
	switch s.run.Spec.Builtin {
	case afev1.BuiltinMergeAndCI:
		if err := builtin.MergeOf(s.run).Validate(); err != nil {
			return nil, true, r.fail(ctx, s, afev1.InvalidSpecReason, "The Run's spec is invalid: "+err.Error())
		}
	case afev1.BuiltinSnapshot:
		job, err := r.snapshotJobOf(ctx, sbx)
		if err != nil {
			if _, ok := sandboxspec.AsInvalid(err); !ok && !errors.Is(err, docker.ErrNotFound) {
				return nil, true, err
			}
			return nil, true, r.fail(ctx, s, afev1.SnapshotFailedReason, "The sandbox's workspace cannot be copied: "+err.Error())
		}
		job.user = user
		return job, false, nil
	}
	return nil, false, nil
}

// begin counts the attempt in the status, writes it (commitAttempt), and
// only then starts its command.
func (r *Reconciler) begin(ctx context.Context, s *runScope, sbx *afev1.Sandbox, a *attempt, uid int) error {
	run := s.run
	now := metav1.Now()
	run.Status.Phase = afev1.RunRunning
	run.Status.Attempts = a.number
	run.Status.StartTime = &now
	run.Status.ContainerID = a.containerID
	writes.SetCondition(run, afev1.RunSandboxReadyCondition, true, afev1.ReadyReason, "Sandbox "+sbx.Name+" is Ready")
	writes.SetCondition(run, afev1.RunCompletedCondition, false, afev1.RunningReason,
		fmt.Sprintf("Attempt %d is running in %s", a.number, a.container))
	if err := r.commitAttempt(ctx, s); err != nil {
		return err
	}

	timeout := attemptTimeout(run, sbx)
	log := logf.FromContext(ctx)
	log.Info("Starting Run", "attempt", a.number, "container", a.container, "timeout", timeout)
	copied := run.DeepCopy()
	r.execs.start(run.UID, a, func(execCtx context.Context) {
		r.execute(logf.IntoContext(execCtx, log), copied, a, uid, timeout)
	})
	r.Recorder.Eventf(run, nil, corev1.EventTypeNormal, "Started", "Execute", "Attempt %d started in container %s", a.number, a.container)
	r.Recorder.Eventf(sbx, run, corev1.EventTypeNormal, "RunStarted", "Execute", "Run %s started (attempt %d)", run.Name, a.number)
	return nil
}

// attemptTimeout is the Run's timeoutSeconds, else its sandbox's, else ten
// minutes.
func attemptTimeout(run *afev1.Run, sbx *afev1.Sandbox) time.Duration {
	timeout := time.Duration(sbx.Spec.TimeoutSeconds) * time.Second
	if run.Spec.TimeoutSeconds != nil {
		timeout = time.Duration(*run.Spec.TimeoutSeconds) * time.Second
	}
	if timeout <= 0 {
		timeout = 600 * time.Second
	}
	return timeout
}

// finish records the outcome of the last attempt, as plan.RunOutcome maps
// it.
func (r *Reconciler) finish(ctx context.Context, s *runScope, a *attempt) error {
	run := s.run
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
		return r.fail(ctx, s, end.Reason, end.Message)
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
	writes.SetCondition(run, afev1.RunCompletedCondition, true, end.Reason, end.Message)
	s.ended = true
	s.afterWrite(func() { r.recordEnd(ctx, run, end, o) })
	return nil
}

// recordEnd records, once the outcome is written, the Events and metrics
// of a Run's end.
func (r *Reconciler) recordEnd(ctx context.Context, run *afev1.Run, end plan.RunEnd, o outcome) {
	timedOut := end.Phase == afev1.RunTimedOut
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
}

// wait keeps the Run Pending while its sandbox is missing or not Ready; the
// sandbox's changes bring it back. It never fails: its error is nil, for
// the callers to return.
func (r *Reconciler) wait(s *runScope, message string) error {
	return r.waitFor(s, afev1.SandboxNotReadyReason, message)
}

// waitFor is wait with a reason that says more than SandboxNotReady.
func (r *Reconciler) waitFor(s *runScope, reason, message string) error {
	run := s.run
	run.Status.Phase = afev1.RunPending
	writes.SetCondition(run, afev1.RunSandboxReadyCondition, false, reason, message)
	writes.SetCondition(run, afev1.RunCompletedCondition, false, reason, "Waiting for the sandbox")
	return nil
}

// fail ends a Run that could not be executed.
func (r *Reconciler) fail(ctx context.Context, s *runScope, reason, message string) error {
	run := s.run
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
	writes.SetCondition(run, afev1.RunCompletedCondition, true, reason, message)
	s.ended = true
	s.afterWrite(func() {
		r.Recorder.Eventf(run, nil, corev1.EventTypeWarning, reason, "Execute", message)
		metrics.Runs.WithLabelValues(string(afev1.RunFailed), "false").Inc()
	})
	return nil
}
