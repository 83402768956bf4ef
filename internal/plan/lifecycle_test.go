package plan

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

func TestSandboxLifecycle(t *testing.T) {
	created := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	at := created.Add
	tests := map[string]struct {
		in   LifecycleInput
		want Lifecycle
	}{
		"no lifecycle":               {in: LifecycleInput{Created: created, Now: at(time.Hour)}, want: Lifecycle{State: LifecycleRun}},
		"spec.suspend":               {in: LifecycleInput{Suspend: true, Created: created, Now: at(time.Second)}, want: Lifecycle{State: LifecycleSuspend}},
		"spec.suspend while busy":    {in: LifecycleInput{Suspend: true, Busy: true, Created: created, Now: at(time.Second)}, want: Lifecycle{State: LifecycleSuspend}},
		"idle, timer running":        {in: LifecycleInput{IdleTimeout: time.Minute, Created: created, LastActivity: at(30 * time.Second), Now: at(time.Minute)}, want: Lifecycle{State: LifecycleRun, Recheck: 30 * time.Second}},
		"idle past the timeout":      {in: LifecycleInput{IdleTimeout: time.Minute, Created: created, LastActivity: at(0), Now: at(time.Minute)}, want: Lifecycle{State: LifecycleSuspend, Idle: true}},
		"busy past the timeout":      {in: LifecycleInput{IdleTimeout: time.Minute, Busy: true, Created: created, LastActivity: at(0), Now: at(time.Hour)}, want: Lifecycle{State: LifecycleRun}},
		"paused past the timeout":    {in: LifecycleInput{IdleTimeout: time.Minute, Paused: true, Created: created, LastActivity: at(0), Now: at(time.Hour)}, want: Lifecycle{State: LifecycleRun, Recheck: time.Minute}},
		"paused while suspended":     {in: LifecycleInput{IdleTimeout: time.Minute, Paused: true, Suspended: true, Created: created, LastActivity: at(0), Now: at(2 * time.Minute)}, want: Lifecycle{State: LifecycleSuspend, Idle: true}},
		"paused, suspended, resumed": {in: LifecycleInput{IdleTimeout: time.Minute, Paused: true, Suspended: true, Created: created, LastActivity: at(2 * time.Minute), Now: at(2 * time.Minute)}, want: Lifecycle{State: LifecycleRun, Recheck: time.Minute}},
		"paused, suspended, a Run":   {in: LifecycleInput{IdleTimeout: time.Minute, Paused: true, Suspended: true, Busy: true, Created: created, Now: at(time.Hour)}, want: Lifecycle{State: LifecycleRun}},
		"paused, spec.suspend":       {in: LifecycleInput{Suspend: true, Paused: true, Created: created, Now: at(time.Hour)}, want: Lifecycle{State: LifecycleSuspend}},
		"deadline ahead":             {in: LifecycleInput{Deadline: time.Hour, Created: created, Now: at(time.Minute)}, want: Lifecycle{State: LifecycleRun, Recheck: 59 * time.Minute}},
		"deadline sooner than idle":  {in: LifecycleInput{Deadline: 2 * time.Minute, IdleTimeout: time.Hour, Created: created, LastActivity: at(time.Minute), Now: at(time.Minute)}, want: Lifecycle{State: LifecycleRun, Recheck: time.Minute}},
		"deadline passed, busy":      {in: LifecycleInput{Deadline: time.Hour, Busy: true, Created: created, Now: at(time.Hour)}, want: Lifecycle{State: LifecycleDeadlineExceeded}},
		"deadline passed, suspended": {in: LifecycleInput{Deadline: time.Hour, Suspend: true, Created: created, Now: at(2 * time.Hour)}, want: Lifecycle{State: LifecycleDeadlineExceeded}},
		"suspended, deadline ahead":  {in: LifecycleInput{Deadline: time.Hour, Suspend: true, Created: created, Now: at(time.Minute)}, want: Lifecycle{State: LifecycleSuspend, Recheck: 59 * time.Minute}},
		"idle, a command running":    {in: LifecycleInput{IdleTimeout: time.Minute, Commands: 1, Created: created, LastActivity: at(0), Now: at(time.Hour)}, want: Lifecycle{State: LifecycleRun, Active: true, Recheck: time.Minute}},
		"idle, a command, deadline":  {in: LifecycleInput{IdleTimeout: time.Minute, Deadline: 70 * time.Minute, Commands: 1, Created: created, LastActivity: at(0), Now: at(time.Hour)}, want: Lifecycle{State: LifecycleRun, Active: true, Recheck: time.Minute}},
		"timer running, a command":   {in: LifecycleInput{IdleTimeout: time.Minute, Commands: 1, Created: created, LastActivity: at(30 * time.Second), Now: at(time.Minute)}, want: Lifecycle{State: LifecycleRun, Recheck: 30 * time.Second}},
		"spec.suspend, a command":    {in: LifecycleInput{Suspend: true, Commands: 1, Created: created, Now: at(time.Second)}, want: Lifecycle{State: LifecycleSuspend}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, SandboxLifecycle(tc.in)); diff != "" {
				t.Errorf("SandboxLifecycle() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// The commands in the container are counted (an engine request) only when
// the sandbox would otherwise be suspended for idleness.
func TestNeedsCommands(t *testing.T) {
	created := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	at := created.Add
	tests := map[string]struct {
		in   LifecycleInput
		want bool
	}{
		"no idle timeout":       {in: LifecycleInput{Created: created, Now: at(time.Hour)}},
		"timer running":         {in: LifecycleInput{IdleTimeout: time.Minute, Created: created, LastActivity: at(30 * time.Second), Now: at(time.Minute)}},
		"idle past the timeout": {in: LifecycleInput{IdleTimeout: time.Minute, Created: created, LastActivity: at(0), Now: at(time.Minute)}, want: true},
		"a Run in flight":       {in: LifecycleInput{IdleTimeout: time.Minute, Busy: true, Created: created, LastActivity: at(0), Now: at(time.Hour)}},
		"spec.suspend":          {in: LifecycleInput{IdleTimeout: time.Minute, Suspend: true, Created: created, LastActivity: at(0), Now: at(time.Hour)}},
		"past its deadline":     {in: LifecycleInput{IdleTimeout: time.Minute, Deadline: time.Minute, Created: created, LastActivity: at(0), Now: at(time.Hour)}},
		"already counted":       {in: LifecycleInput{IdleTimeout: time.Minute, Commands: 2, Created: created, LastActivity: at(0), Now: at(time.Minute)}, want: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := tc.in.NeedsCommands(); got != tc.want {
				t.Errorf("NeedsCommands() = %t, want %t", got, tc.want)
			}
		})
	}
}

func TestWasSuspended(t *testing.T) {
	cond := func(reason string) afev1.SandboxStatus {
		return afev1.SandboxStatus{Conditions: []metav1.Condition{{Type: afev1.ContainerReadyCondition, Status: metav1.ConditionFalse, Reason: reason}}}
	}
	tests := map[string]struct {
		status afev1.SandboxStatus
		want   bool
	}{
		"new":       {want: false},
		"suspended": {status: cond(afev1.SuspendedReason), want: true},
		"lost":      {status: cond(afev1.SandboxLostReason), want: false},
		"deadline":  {status: cond(afev1.DeadlineExceededReason), want: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, WasSuspended(&tc.status)); diff != "" {
				t.Errorf("WasSuspended() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
