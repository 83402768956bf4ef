package run

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

func TestSandboxGate(t *testing.T) {
	run := &afev1.Run{Spec: afev1.RunSpec{SandboxRef: afev1.SandboxReference{Name: "box"}}}
	started := run.DeepCopy()
	started.Status.Attempts = 1
	ready := func(reason string, ok bool) *afev1.Sandbox {
		sbx := &afev1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "box"}}
		status := metav1.ConditionFalse
		if ok {
			status = metav1.ConditionTrue
		}
		sbx.Status.Conditions = []metav1.Condition{{Type: afev1.SandboxReadyCondition, Status: status, Reason: reason}}
		if reason == afev1.SecretNotFoundReason {
			sbx.Status.Conditions[0].Message = "Env T: Secret creds does not exist"
		}
		return sbx
	}
	deleting := ready(afev1.ReadyReason, true)
	now := metav1.Now()
	deleting.DeletionTimestamp = &now
	suspendedBySpec := ready(afev1.SuspendedReason, false)
	suspendedBySpec.Spec.Suspend = true
	finished := &afev1.Ticket{ObjectMeta: metav1.ObjectMeta{Name: "tk"}}
	tests := map[string]struct {
		run      *afev1.Run
		sbx      *afev1.Sandbox
		finished *afev1.Ticket
		want     gate
	}{
		"ready":                      {run: run, sbx: ready(afev1.ReadyReason, true)},
		"no sandbox yet":             {run: run, want: gate{message: "Sandbox box does not exist yet"}},
		"sandbox gone after a start": {run: started, want: gate{fail: true, reason: afev1.SandboxDeletedReason, message: "Sandbox box was deleted before the Run could end"}},
		"sandbox being deleted":      {run: run, sbx: deleting, want: gate{fail: true, reason: afev1.SandboxDeletedReason, message: "Sandbox box was deleted before the Run could end"}},
		"its ticket finished":        {run: run, finished: finished, want: gate{fail: true, reason: afev1.TicketFinishedReason, message: "Ticket tk finished before the Run could end"}},
		"past its deadline":          {run: run, sbx: ready(afev1.DeadlineExceededReason, false), want: gate{fail: true, reason: afev1.DeadlineExceededReason, message: "Sandbox box ran past its lifecycle.activeDeadlineSeconds"}},
		"suspended when idle":        {run: run, sbx: ready(afev1.SuspendedReason, false), want: gate{message: "Sandbox box is suspended and is resumed for the Run"}},
		"suspended by spec":          {run: run, sbx: suspendedBySpec, want: gate{message: "Sandbox box is suspended (spec.suspend); the Run starts once it is resumed"}},
		"not ready":                  {run: run, sbx: ready(afev1.ProvisioningReason, false), want: gate{message: "Sandbox box is not Ready"}},
		"its env refused": {run: run, sbx: ready(afev1.SecretNotFoundReason, false),
			want: gate{reason: afev1.SecretNotFoundReason, message: "The env of sandbox box cannot be given to the Run: Env T: Secret creds does not exist"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := sandboxGate(tc.run, tc.sbx, tc.finished)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(gate{})); diff != "" {
				t.Errorf("sandboxGate() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
