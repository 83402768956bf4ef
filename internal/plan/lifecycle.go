package plan

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// LifecycleState is whether a sandbox should run.
type LifecycleState string

const (
	// LifecycleRun keeps the sandbox running (resuming it when suspended).
	LifecycleRun LifecycleState = "Run"
	// LifecycleSuspend stops its container and proxy and keeps the rest.
	LifecycleSuspend LifecycleState = "Suspend"
	// LifecycleDeadlineExceeded stops it for good: it ran past
	// lifecycle.activeDeadlineSeconds.
	LifecycleDeadlineExceeded LifecycleState = "DeadlineExceeded"
)

// LifecycleInput is what a sandbox's lifecycle is decided from. Every
// field comes from the Sandbox's spec, its Runs and its ticket in the API,
// or the controller's own record of activity; none can make another
// sandbox suspend or run.
type LifecycleInput struct {
	// Suspend is spec.suspend.
	Suspend bool
	// IdleTimeout is lifecycle.idleTimeoutSeconds; zero is never.
	IdleTimeout time.Duration
	// Deadline is lifecycle.activeDeadlineSeconds from Created; zero is
	// none.
	Deadline time.Duration
	Created  time.Time
	// Paused: its ticket is Paused, which leaves a sandbox as it is: a
	// running one running, a suspended one suspended (but for a Run).
	Paused bool
	// Suspended: the sandbox is suspended now (WasSuspended).
	Suspended bool
	// Busy: a Run of the sandbox is Pending or Running, or a command runs
	// in its container.
	Busy bool
	// LastActivity is when the sandbox was last seen busy (or resumed, or
	// became Ready).
	LastActivity time.Time
	// Commands is how many commands run in the sandbox's container (a
	// shell, say). Counting them is an engine request: the caller counts
	// them only when NeedsCommands says the decision hangs on them.
	Commands int
	Now      time.Time
}

// NeedsCommands tells whether the decision hangs on the commands running
// in the container: only when the sandbox would otherwise be suspended for
// idleness.
func (in LifecycleInput) NeedsCommands() bool {
	in.Commands = 0
	d := SandboxLifecycle(in)
	return d.State == LifecycleSuspend && d.Idle
}

// Lifecycle is the decision for a sandbox.
type Lifecycle struct {
	State LifecycleState
	// Idle: the suspension is for idleness (not spec.suspend).
	Idle bool
	// Active: commands running in the container kept an idle sandbox
	// running; the sandbox is active now.
	Active bool
	// Recheck is when to decide again without any event (a timer running
	// out); zero is never.
	Recheck time.Duration
}

// SandboxLifecycle decides whether the sandbox should run, be suspended,
// or has run past its deadline.
func SandboxLifecycle(in LifecycleInput) Lifecycle {
	var deadlineLeft time.Duration
	if in.Deadline > 0 {
		deadlineLeft = in.Created.Add(in.Deadline).Sub(in.Now)
		if deadlineLeft <= 0 {
			return Lifecycle{State: LifecycleDeadlineExceeded}
		}
	}
	switch {
	case in.Suspend:
		return Lifecycle{State: LifecycleSuspend, Recheck: deadlineLeft}
	case in.Busy || in.IdleTimeout <= 0:
		return Lifecycle{State: LifecycleRun, Recheck: deadlineLeft}
	case in.Paused && !in.Suspended:
		// Not suspended while paused; looked at again in a while, as an
		// unpaused ticket does not reconcile its sandboxes by itself. A
		// suspended one stays so, until activity (a resume) as always.
		return Lifecycle{State: LifecycleRun, Recheck: Sooner(in.IdleTimeout, deadlineLeft)}
	}
	idleLeft := in.LastActivity.Add(in.IdleTimeout).Sub(in.Now)
	switch {
	case idleLeft <= 0 && in.Commands > 0:
		// Work in flight: never suspended under it. No event marks the
		// end of a command seen this way but its exec_die; look again
		// in a while should it be missed.
		return Lifecycle{State: LifecycleRun, Active: true, Recheck: Sooner(in.IdleTimeout, deadlineLeft)}
	case idleLeft <= 0:
		return Lifecycle{State: LifecycleSuspend, Idle: true, Recheck: deadlineLeft}
	}
	return Lifecycle{State: LifecycleRun, Recheck: Sooner(idleLeft, deadlineLeft)}
}

// Sooner is the smaller of two durations, zero being none.
func Sooner(a, b time.Duration) time.Duration {
	switch {
	case a <= 0:
		return b
	case b <= 0 || a < b:
		return a
	}
	return b
}

// WasSuspended is true when the status says the controller stopped the
// sandbox's container, for a suspension or its deadline (which a longer
// deadline lifts): a stopped container is then started again rather than
// treated as lost. The status is writable by
// whoever may write sandboxes/status, so a forged one only changes how this
// sandbox's own container, verified by its labels, comes back.
func WasSuspended(st *afev1.SandboxStatus) bool {
	c := meta.FindStatusCondition(st.Conditions, afev1.ContainerReadyCondition)
	return c != nil && (c.Reason == afev1.SuspendedReason || c.Reason == afev1.DeadlineExceededReason)
}
