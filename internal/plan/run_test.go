package plan

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

func TestRunOutcome(t *testing.T) {
	took := 1500*time.Millisecond + 700*time.Microsecond
	tests := map[string]struct {
		end  AttemptEnd
		want RunEnd
	}{
		"exit 0": {
			end:  AttemptEnd{ExitCode: 0, Duration: took},
			want: RunEnd{Phase: afev1.RunCompleted, Reason: afev1.ExitedReason, Message: "Exited with code 0 after 1500ms", ExitCode: ptr.To[int32](0), Output: true, OK: true},
		},
		"non-zero exit is an outcome": {
			end:  AttemptEnd{ExitCode: 3, Duration: took},
			want: RunEnd{Phase: afev1.RunCompleted, Reason: afev1.ExitedReason, Message: "Exited with code 3 after 1500ms", ExitCode: ptr.To[int32](3), Output: true},
		},
		"killed at the CPU-seconds limit": {
			end: AttemptEnd{ExitCode: 152, Duration: took, CPUSeconds: 2},
			want: RunEnd{Phase: afev1.RunCompleted, Reason: afev1.ExitedReason, ExitCode: ptr.To[int32](152), Output: true,
				Message: "Exited with code 152 after 1500ms: killed by SIGXCPU, the CPU-seconds limit was reached (resources.cpuSeconds: 2 per process)"},
		},
		"killed a second past the CPU-seconds limit, SIGXCPU ignored": {
			end: AttemptEnd{ExitCode: 137, Duration: took, CPUSeconds: 2},
			want: RunEnd{Phase: afev1.RunCompleted, Reason: afev1.ExitedReason, ExitCode: ptr.To[int32](137), Output: true,
				Message: "Exited with code 137 after 1500ms: killed by SIGKILL, as a process that ignores SIGXCPU is one second past the CPU-seconds limit (resources.cpuSeconds: 2 per process), or by the memory limit"},
		},
		"exit 152 without a CPU-seconds limit": {
			end:  AttemptEnd{ExitCode: 152, Duration: took},
			want: RunEnd{Phase: afev1.RunCompleted, Reason: afev1.ExitedReason, Message: "Exited with code 152 after 1500ms", ExitCode: ptr.To[int32](152), Output: true},
		},
		"result refused": {
			end: AttemptEnd{ExitCode: 0, Duration: took, ResultRefused: "it nests 9999 levels deep, more than 64"},
			want: RunEnd{Phase: afev1.RunCompleted, Reason: afev1.ResultRefusedReason, ExitCode: ptr.To[int32](0), Output: true, OK: true,
				Message: "Exited with code 0 after 1500ms; its JSON result was refused (it nests 9999 levels deep, more than 64), so status.result is empty"},
		},
		"result refused, non-zero exit": {
			end: AttemptEnd{ExitCode: 2, Duration: took, ResultRefused: "why"},
			want: RunEnd{Phase: afev1.RunCompleted, Reason: afev1.ResultRefusedReason, ExitCode: ptr.To[int32](2), Output: true,
				Message: "Exited with code 2 after 1500ms; its JSON result was refused (why), so status.result is empty"},
		},
		"timed out, result refused": {
			end: AttemptEnd{ExitCode: 137, TimedOut: true, Duration: took, ResultRefused: "why"},
			want: RunEnd{Phase: afev1.RunTimedOut, Reason: afev1.TimedOutReason, ExitCode: ptr.To[int32](137), Output: true,
				Message: "Killed with every process it started after 1.5s; its JSON result was refused (why), so status.result is empty"},
		},
		"exited, container removed with survivors": {
			end: AttemptEnd{ExitCode: 137, ContainerKilled: true, Duration: took},
			want: RunEnd{Phase: afev1.RunCompleted, Reason: afev1.ExitedReason, ExitCode: ptr.To[int32](137), Output: true,
				Message: "Exited with code 137 after 1500ms; some of its processes survived every kill, so the sandbox container was removed with them and the sandbox is recreated as lost"},
		},
		"timed out": {
			end:  AttemptEnd{ExitCode: 137, TimedOut: true, Duration: took},
			want: RunEnd{Phase: afev1.RunTimedOut, Reason: afev1.TimedOutReason, Message: "Killed with every process it started after 1.5s", ExitCode: ptr.To[int32](137), Output: true},
		},
		"timed out, container removed": {
			end: AttemptEnd{ExitCode: 137, TimedOut: true, ContainerKilled: true, Duration: took},
			want: RunEnd{Phase: afev1.RunTimedOut, Reason: afev1.TimedOutReason, ExitCode: ptr.To[int32](137), Output: true,
				Message: "Timed out after 1.5s; some of its processes survived every kill, so the sandbox container was removed with them and the sandbox is recreated as lost"},
		},
		"timed out with exit 0 is not OK": {
			end:  AttemptEnd{ExitCode: 0, TimedOut: true, Duration: took},
			want: RunEnd{Phase: afev1.RunTimedOut, Reason: afev1.TimedOutReason, Message: "Killed with every process it started after 1.5s", ExitCode: ptr.To[int32](0), Output: true},
		},
		"could not be executed": {
			end:  AttemptEnd{ExitCode: 127, ExecErr: "OCI runtime exec failed: no such file", Duration: took},
			want: RunEnd{Phase: afev1.RunFailed, Reason: afev1.ExecFailedReason, Message: "The command could not be executed: OCI runtime exec failed: no such file", ExitCode: ptr.To[int32](127)},
		},
		"builtin could not do its work": {
			end:  AttemptEnd{ExitCode: 1, FailReason: afev1.GitNotFoundReason, FailMessage: "No git in the image", Duration: took},
			want: RunEnd{Phase: afev1.RunFailed, Reason: afev1.GitNotFoundReason, Message: "No git in the image", Output: true},
		},
		"exec failure wins over a builtin's": {
			end:  AttemptEnd{ExitCode: 126, ExecErr: "boom", FailReason: afev1.GitFailedReason, FailMessage: "x"},
			want: RunEnd{Phase: afev1.RunFailed, Reason: afev1.ExecFailedReason, Message: "The command could not be executed: boom", ExitCode: ptr.To[int32](126)},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, RunOutcome(tc.end)); diff != "" {
				t.Errorf("RunOutcome() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
