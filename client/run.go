package client

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// A Command is what a Run executes: Script or Cmd, with its options
// (Timeout, WorkingDir, MaxAttempts, OnCreate).
type Command struct {
	spec     afev1.RunSpec
	onCreate func(run string)
}

// OnCreate calls f with the Run's name once it is created, before its end
// is waited for.
func (c Command) OnCreate(f func(run string)) Command {
	c.onCreate = f
	return c
}

// Script runs script with /bin/sh -c.
func Script(script string) Command {
	return Command{spec: afev1.RunSpec{Script: script}}
}

// Cmd runs the command as is (exec form, no shell).
func Cmd(args ...string) Command {
	return Command{spec: afev1.RunSpec{Command: args}}
}

// Timeout bounds the command: at the deadline it and every process it
// started are killed, and the outcome says TimedOut. The context's
// deadline, when sooner, bounds it as well.
func (c Command) Timeout(d time.Duration) Command {
	c.spec.TimeoutSeconds = ptr.To(int32(max(1, math.Ceil(d.Seconds()))))
	return c
}

// WorkingDir is where the command starts (default /workspace).
func (c Command) WorkingDir(dir string) Command {
	c.spec.WorkingDir = dir
	return c
}

// MaxAttempts bounds how often the Run is started again after a restart
// of the controller or a loss of the sandbox (default 3).
func (c Command) MaxAttempts(n int32) Command {
	c.spec.MaxAttempts = &n
	return c
}

// Outcome is how a Run ended. A non-zero exit is an outcome (OK false),
// not an error.
type Outcome struct {
	// Run is the Run's name.
	Run string
	// OK is true when the command exited with 0.
	OK bool
	// ExitCode of the command (137 when killed; -1 when it never exited).
	ExitCode int32
	// TimedOut is true when the deadline killed the command.
	TimedOut bool
	// Output is stdout and stderr as they interleaved: the last 32 KiB.
	Output string
	// OutputTruncated is true when Output lost its beginning.
	OutputTruncated bool
	// Result holds the last stdout line that parses as a JSON object.
	Result map[string]any
	// Attempts counts executions.
	Attempts int32
	// Duration is how long the last attempt took.
	Duration time.Duration
	// Phase is the Run's phase: Completed, TimedOut or Failed.
	Phase afev1.RunPhase
	// Message is the Completed condition's message: why a Run Failed.
	Message string
}

// Run executes the command in the sandbox as a Run, waits from a watch
// until it ends and returns its outcome. The context's deadline bounds it:
// the Run's timeout is no later, and a context that ends first is an error
// (IsTimedOut). A Run that timed out is an outcome with TimedOut and an
// error (IsTimedOut, reason TimedOut); one that could not be executed an
// error (IsFailed) with the condition's reason.
func (c *Client) Run(ctx context.Context, sandbox string, cmd Command) (*Outcome, error) {
	spec := cmd.spec
	spec.SandboxRef = afev1.SandboxReference{Name: sandbox}
	if dl, ok := ctx.Deadline(); ok {
		left := int32(max(1, math.Floor(time.Until(dl).Seconds())))
		if spec.TimeoutSeconds == nil || *spec.TimeoutSeconds > left {
			spec.TimeoutSeconds = &left
		}
	}
	run, err := c.runToEnd(ctx, sandbox, spec, cmd.onCreate)
	if err != nil {
		return nil, err
	}
	return OutcomeOf(run)
}

// runToEnd creates a Run of spec and watches it until it ends.
func (c *Client) runToEnd(ctx context.Context, sandbox string, spec afev1.RunSpec, onCreate func(string)) (*afev1.Run, error) {
	run := &afev1.Run{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.namespace, GenerateName: sandbox + "-run-"},
		Spec:       spec,
	}
	if err := c.kube.Create(ctx, run); err != nil {
		return nil, wrap(err, "create a run in sandbox %s", sandbox)
	}
	if onCreate != nil {
		onCreate(run.Name)
	}
	err := c.waitFor(ctx, run, &afev1.RunList{}, func() (bool, error) { return run.Status.Phase.Terminal(), nil })
	if IsTimedOut(err) {
		return run, &Error{Kind: KindTimedOut, Reason: "DeadlineExceeded", Err: err,
			Message: fmt.Sprintf("run %s did not end before the context's deadline (phase %s)", run.Name, run.Status.Phase)}
	}
	return run, err
}

// OutcomeOf is the outcome of an ended Run, and the error of a Run that
// timed out (IsTimedOut) or could not be executed (IsFailed, with the
// Completed condition's reason).
func OutcomeOf(run *afev1.Run) (*Outcome, error) {
	st := run.Status
	o := &Outcome{
		Run: run.Name, OK: ptr.Deref(st.OK, false), ExitCode: ptr.Deref(st.ExitCode, -1),
		TimedOut: ptr.Deref(st.TimedOut, false), Output: st.Output, OutputTruncated: ptr.Deref(st.OutputTruncated, false),
		Attempts: st.Attempts, Duration: time.Duration(st.DurationMilliseconds) * time.Millisecond, Phase: st.Phase,
	}
	if len(st.Result) > 0 {
		o.Result = make(map[string]any, len(st.Result))
		for k, v := range st.Result {
			var x any
			if err := json.Unmarshal(v.Raw, &x); err != nil {
				return o, fmt.Errorf("run %s: result %q: %w", run.Name, k, err)
			}
			o.Result[k] = x
		}
	}
	cond := meta.FindStatusCondition(st.Conditions, afev1.RunCompletedCondition)
	reason, msg := "", ""
	if cond != nil {
		reason, msg, o.Message = cond.Reason, ": "+cond.Message, cond.Message
	}
	switch st.Phase {
	case afev1.RunTimedOut:
		return o, &Error{Kind: KindTimedOut, Reason: afev1.TimedOutReason, Message: fmt.Sprintf("run %s timed out and was killed", run.Name)}
	case afev1.RunFailed:
		return o, &Error{Kind: KindFailed, Reason: reason, Message: fmt.Sprintf("run %s could not be executed%s", run.Name, msg)}
	}
	return o, nil
}
