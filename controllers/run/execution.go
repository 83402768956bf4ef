package run

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/runexec"
	"afe.dev/sandbox/internal/sandboxspec"
	"afe.dev/sandbox/internal/telemetry"
)

// attempt is one execution of a Run, in flight or finished.
type attempt struct {
	number     int32
	gid        int
	sandboxGID int
	// sandbox is the UID of the Sandbox whose slot the attempt holds.
	sandbox types.UID
	// container names the sandbox container in messages; every request
	// to the engine names it by containerID, verified when the attempt
	// started.
	container   string
	containerID string
	cancel      context.CancelFunc
	done        atomic.Bool
	outcome     outcome
	// snapshot is what a Snapshot Run copies.
	snapshot *snapshotJob
	// env is the sandbox's declared env, resolved when the attempt
	// started: the environment of its steps (step), never of the
	// controller's own execs (kills, process lists, the check of a
	// builtin's report).
	env []string
	// cpuSeconds is the sandbox's resources.cpuSeconds (0: none), to word
	// an end at that limit.
	cpuSeconds int64
	// ticket is the sandbox's ticket, for the telemetry.
	ticket string
}

// outcome is how an attempt ended.
type outcome struct {
	exitCode  int
	timedOut  bool
	output    string
	truncated bool
	result    map[string]json.RawMessage
	// resultRefused says why the command's result was refused (too deep,
	// too large); result is nil then.
	resultRefused string
	started       time.Time
	finished      time.Time
	// lost: the sandbox container went away during the attempt; the Run is
	// executed again in its replacement.
	lost bool
	// execErr: the command could not be executed at all.
	execErr string
	// failReason and failMessage: a builtin could not do its work (no git,
	// no repository, a copy that failed).
	failReason, failMessage string
	// snapshot is the volume a Snapshot Run made.
	snapshot string
	// abandoned: the controller is stopping; the Run stays Running and is
	// executed again after the restart.
	abandoned bool
	// containerKilled: processes of the attempt survived every kill at its
	// deadline, so the sandbox container was removed (a loss of the
	// sandbox, which the Sandbox controller recreates).
	containerKilled bool
	// measure is the size and SHA-256 of a command's whole output (nil for
	// a builtin: its stated output is measured).
	measure *telemetry.Output
	// unclean: a step's exec ended by a signal or without an exit code,
	// so its script may not have killed what the step left (the workload,
	// of the same uid, can kill it).
	unclean bool
}

// execute runs one attempt to its end and reports the end to the Run's
// reconciler.
func (r *Reconciler) execute(ctx context.Context, run *afev1.Run, a *attempt, uid int, timeout time.Duration) {
	log := logf.FromContext(ctx).WithValues("run", run.Namespace+"/"+run.Name, "attempt", a.number)
	ctx = logf.IntoContext(ctx, log)
	o := outcome{started: time.Now()}
	ended := r.Config.Executions.Start(string(a.sandbox), "Run/"+run.Name, o.started)
	if run.Spec.Builtin == afev1.BuiltinSnapshot {
		r.executeSnapshot(ctx, run, a, timeout, &o)
	} else {
		// The steps' execs run under stepCtx, which ends once the deadline
		// is enforced: a process that holds the output open cannot keep
		// the Run Running.
		stepCtx, abandon := context.WithCancel(ctx)
		defer abandon()
		var timedOut, containerKilled atomic.Bool
		enforced := make(chan struct{})
		deadline := time.AfterFunc(timeout, func() {
			defer close(enforced)
			defer abandon()
			timedOut.Store(true)
			log.Info("Run deadline reached; killing its processes", "timeout", timeout)
			containerKilled.Store(r.endAttempt(context.WithoutCancel(ctx), a, uid))
		})
		if run.Spec.Builtin == afev1.BuiltinMergeAndCI {
			r.executeMerge(stepCtx, run, a, uid, &timedOut, &o)
		} else {
			r.executeCommand(stepCtx, run, a, uid, &timedOut, &o)
		}
		if !deadline.Stop() {
			<-enforced // the outcome follows the enforcement, never precedes it
		}
		if timedOut.Load() && ctx.Err() == nil {
			// Whatever the step made of an abandoned stream, this is a
			// timeout and its outcome.
			o.abandoned, o.lost = false, false
			o.timedOut, o.containerKilled = true, containerKilled.Load()
			if o.exitCode == 0 || o.exitCode == -1 {
				o.exitCode = 137
			}
		}
		if ctx.Err() == nil && r.sweepAttempt(context.WithoutCancel(ctx), run, a, uid, o.unclean || o.timedOut) {
			o.containerKilled = true
		}
	}
	o.finished = time.Now()
	ended(o.finished)
	a.outcome = o
	// The attempt's record is queued before its end is visible: a
	// reconcile that sees it done may write the Run's end (and a Flush
	// of the telemetry after it commits this record first).
	if !o.abandoned {
		r.recordAttempt(run, a, uid)
	}
	a.done.Store(true)
	if !o.abandoned {
		r.execs.ended(run)
		r.nudgeWaiting(ctx, run) // its slot is free
	}
}

// executeCommand runs the Run's command or script.
func (r *Reconciler) executeCommand(ctx context.Context, run *afev1.Run, a *attempt, uid int, timedOut *atomic.Bool, o *outcome) {
	tail := &runexec.Tail{Limit: afev1.RunOutputLimit}
	results := &runexec.Results{}
	// The whole output, bounded, is kept too (kubectl afe logs -f).
	logw := io.Discard
	if r.Config.RunLogs != nil {
		w, err := r.Config.RunLogs.Create(run.UID, a.number)
		if err != nil {
			logf.FromContext(ctx).Error(err, "Cannot keep the Run's log")
		} else {
			defer func() { _ = w.Close() }()
			logw = w
		}
	}
	o.measure = telemetry.NewOutput()
	code, ok := r.step(ctx, a, uid, timedOut, o, docker.ExecSpec{
		Cmd:        runexec.Command(run.Spec.Command, run.Spec.Script),
		WorkingDir: run.Spec.WorkingDir,
		Stdout:     io.MultiWriter(tail, results, logw, o.measure),
		Stderr:     io.MultiWriter(tail, logw, o.measure),
	})
	if o.timedOut {
		o.output, o.truncated = tail.String(), tail.Truncated()
	}
	if !ok {
		return
	}
	o.exitCode = code
	o.timedOut = timedOut.Load()
	o.output = tail.String()
	o.truncated = tail.Truncated()
	last := results.Last()
	o.result, o.resultRefused = last.Fields, last.Refused
	if !o.timedOut && len(run.Spec.Command) > 0 {
		o.execErr = execFailure(code, o.output)
	}
	if o.execErr != "" && r.containerGone(ctx, a) {
		// The engine could not enter a container that was going away:
		// a loss of the sandbox, not a command that cannot run.
		o.execErr, o.lost = "", true
	}
}

// step runs one exec of an attempt as the sandbox's uid with the attempt's
// group, then kills whatever it left running. It returns false when the
// attempt ended without an outcome, which it records in o: the controller
// is stopping (abandoned), or the container went away (lost; the Run is
// executed again).
func (r *Reconciler) step(ctx context.Context, a *attempt, uid int, timedOut *atomic.Bool, o *outcome, spec docker.ExecSpec) (int, bool) {
	spec.User = fmt.Sprintf("%d:%d", uid, a.gid)
	spec.Env = sandboxspec.ExecEnv(a.env, spec.Env)
	// The command, then the kill of what it left, in one exec: nothing the
	// command started outlives it (processes that left the output stream
	// included), and the exec's end is the step's.
	spec.Cmd = runexec.StepCommand(a.gid, spec.Cmd)
	code, err := r.Engine.Exec(ctx, a.containerID, spec)
	if err != nil || code >= 128 {
		o.unclean = true
	}
	switch {
	case ctx.Err() != nil && timedOut.Load():
		// Abandoned at the deadline; the output kept so far is the
		// outcome's, and execute records the timeout.
		o.exitCode, o.timedOut = 137, true
		return 137, false
	case ctx.Err() != nil:
		o.abandoned = true
		return code, false
	case err != nil:
		// The container went away, or the engine did: either way this
		// attempt's outcome is unknown and the Run is executed again.
		logf.FromContext(ctx).Info("Run attempt interrupted", "error", err.Error())
		o.lost = true
		return code, false
	}
	if code != 0 && !timedOut.Load() && r.Stops.StoppedSince(a.containerID, o.started) {
		// This manager stopped the container under the command (a
		// suspension): an interruption, executed again once it runs.
		logf.FromContext(ctx).Info("Run attempt interrupted by the container's stop", "exitCode", code)
		o.lost = true
		return code, false
	}
	// Killed by a signal (maybe the container's end), or 126: the engine
	// could not start the exec in a container going away ("ttrpc:
	// closed").
	if !timedOut.Load() && (code >= 128 || code == 126) && r.containerGone(ctx, a) {
		o.lost = true
		return code, false
	}
	return code, true
}

// execFailure is the engine's message when an exec could not start its
// program at all (no such binary or directory), empty otherwise.
func execFailure(code int, output string) string {
	if (code == 126 || code == 127) && (strings.Contains(output, "OCI runtime exec failed") ||
		strings.HasPrefix(output, runexec.ExecFailedPrefix)) {
		return strings.TrimSpace(output)
	}
	return ""
}

// recordAttempt puts an attempt that reached its end into the telemetry:
// the sandbox and ticket as the controller derived them, the Run and
// attempt, the command as the spec gave it (a builtin by its name).
func (r *Reconciler) recordAttempt(run *afev1.Run, a *attempt, uid int) {
	o := &a.outcome
	rec := telemetry.Record{
		Namespace: run.Namespace, Sandbox: run.Spec.SandboxRef.Name, SandboxUID: string(a.sandbox), Ticket: a.ticket,
		Started: o.started, Ended: o.finished, User: fmt.Sprintf("%d:%d", uid, a.gid), ExitCode: o.exitCode,
		Run: run.Name, Attempt: a.number, Source: telemetry.SourceRun, StartedBy: "Run " + run.Namespace + "/" + run.Name,
	}
	if run.Spec.Builtin != "" {
		rec.Source, rec.Command = telemetry.SourceBuiltin, []string{"builtin", string(run.Spec.Builtin)}
		m := telemetry.NewOutput()
		_, _ = m.Write([]byte(o.output))
		rec.OutputBytes, rec.OutputSHA256 = m.Sum()
	} else {
		rec.Command = runexec.Command(run.Spec.Command, run.Spec.Script)
		rec.OutputBytes, rec.OutputSHA256 = o.measure.Sum()
	}
	telemetry.RecordCommand(r.Config.Telemetry, rec, afev1.SandboxReady)
}
