package plan

import (
	"fmt"
	"time"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// AttemptEnd is how an attempt of a Run that reached an outcome ended.
type AttemptEnd struct {
	ExitCode int
	// TimedOut: killed at its deadline; ContainerKilled: some of its
	// processes survived every kill (at its deadline or after its end), and
	// the sandbox container was removed with them.
	TimedOut, ContainerKilled bool
	// ExecErr: the command could not be executed at all.
	ExecErr string
	// FailReason and FailMessage: a builtin could not do its work.
	FailReason, FailMessage string
	// Duration is from the start of the attempt to its end.
	Duration time.Duration
	// CPUSeconds is the sandbox's per-process CPU-time limit (0: none).
	CPUSeconds int64
	// ResultRefused says why the command's JSON result was refused (empty:
	// none was).
	ResultRefused string
}

// The exit statuses of a process the kernel ended at its CPU-time limit:
// SIGXCPU at the soft limit, SIGKILL at the hard one.
const (
	exitSIGXCPU = 128 + 24
	exitSIGKILL = 128 + 9
)

// RunEnd is the outcome a Run's status states for an attempt's end.
type RunEnd struct {
	// Phase is Completed, TimedOut or Failed.
	Phase afev1.RunPhase
	// Reason and Message are those of the Completed condition.
	Reason, Message string
	// ExitCode is the exit code stated; nil for a Failed Run that has none.
	ExitCode *int32
	// Output tells whether the attempt's output is stated.
	Output bool
	// OK is status.ok.
	OK bool
}

// RunOutcome maps an attempt's end to the Run's outcome: a non-zero exit is
// an outcome (Completed, not OK), a deadline is TimedOut, and only a command
// that could not be executed, or a builtin that could not do its work, is
// Failed.
func RunOutcome(a AttemptEnd) RunEnd {
	code := int32(a.ExitCode)
	// Stated in whole milliseconds, as status.durationMilliseconds.
	took := a.Duration.Truncate(time.Millisecond)
	switch {
	case a.ExecErr != "":
		return RunEnd{Phase: afev1.RunFailed, Reason: afev1.ExecFailedReason,
			Message: "The command could not be executed: " + a.ExecErr, ExitCode: &code}
	case a.FailReason != "":
		return RunEnd{Phase: afev1.RunFailed, Reason: a.FailReason, Message: a.FailMessage, Output: true}
	case a.TimedOut && a.ContainerKilled:
		return RunEnd{Phase: afev1.RunTimedOut, Reason: afev1.TimedOutReason, ExitCode: &code, Output: true,
			Message: fmt.Sprintf("Timed out after %s; some of its processes survived every kill, so the sandbox container was removed "+
				"with them and the sandbox is recreated as lost", took) + refusal(a.ResultRefused)}
	case a.TimedOut:
		return RunEnd{Phase: afev1.RunTimedOut, Reason: afev1.TimedOutReason, ExitCode: &code, Output: true,
			Message: fmt.Sprintf("Killed with every process it started after %s", took) + refusal(a.ResultRefused)}
	}
	message := fmt.Sprintf("Exited with code %d after %dms", code, took.Milliseconds())
	switch {
	case a.CPUSeconds > 0 && a.ExitCode == exitSIGXCPU:
		message += fmt.Sprintf(": killed by SIGXCPU, the CPU-seconds limit was reached (resources.cpuSeconds: %d per process)", a.CPUSeconds)
	case a.CPUSeconds > 0 && a.ExitCode == exitSIGKILL:
		// A process that ignores SIGXCPU gets SIGKILL at the hard limit,
		// a second later; the memory limit's kill looks the same.
		message += fmt.Sprintf(": killed by SIGKILL, as a process that ignores SIGXCPU is one second past the CPU-seconds limit "+
			"(resources.cpuSeconds: %d per process), or by the memory limit", a.CPUSeconds)
	}
	if a.ContainerKilled {
		message += "; some of its processes survived every kill, so the sandbox container was removed with them and the sandbox is recreated as lost"
	}
	reason := afev1.ExitedReason
	if a.ResultRefused != "" {
		reason = afev1.ResultRefusedReason
	}
	return RunEnd{Phase: afev1.RunCompleted, Reason: reason, ExitCode: &code, Output: true, OK: code == 0,
		Message: message + refusal(a.ResultRefused)}
}

// refusal is the end of a message for a result refused because of why.
func refusal(why string) string {
	if why == "" {
		return ""
	}
	return "; its JSON result was refused (" + why + "), so status.result is empty"
}
