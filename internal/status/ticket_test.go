package status

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

func TestSummarizeTicketSuspended(t *testing.T) {
	sandbox := func(phase afev1.SandboxPhase, ready bool) afev1.Sandbox {
		s := afev1.Sandbox{}
		s.Status.Phase = phase
		s.Status.Conditions = []metav1.Condition{cond(afev1.SandboxReadyCondition, string(phase), ready)}
		return s
	}
	tests := map[string]struct {
		sandboxes  []afev1.Sandbox
		wantReason string
		wantPhase  afev1.TicketPhase
	}{
		"all ready":            {sandboxes: []afev1.Sandbox{sandbox(afev1.SandboxReady, true), sandbox(afev1.SandboxReady, true)}, wantReason: afev1.ReadyReason, wantPhase: afev1.TicketReady},
		"one suspended":        {sandboxes: []afev1.Sandbox{sandbox(afev1.SandboxReady, true), sandbox(afev1.SandboxSuspended, false)}, wantReason: afev1.SandboxesSuspendedReason, wantPhase: afev1.TicketProvisioning},
		"suspended and coming": {sandboxes: []afev1.Sandbox{sandbox(afev1.SandboxProvisioning, false), sandbox(afev1.SandboxSuspended, false)}, wantReason: afev1.SandboxesNotReadyReason, wantPhase: afev1.TicketProvisioning},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			st := &afev1.TicketStatus{}
			SummarizeTicket(st, 1, afev1.TicketActive, tc.sandboxes, int32(len(tc.sandboxes)), nil)
			got := meta.FindStatusCondition(st.Conditions, afev1.TicketReadyCondition)
			if diff := cmp.Diff([]string{tc.wantReason, string(tc.wantPhase)}, []string{got.Reason, string(st.Phase)}); diff != "" {
				t.Errorf("SummarizeTicket() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
