package status

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

func cond(t, reason string, ok bool) metav1.Condition {
	s := metav1.ConditionFalse
	if ok {
		s = metav1.ConditionTrue
	}
	return metav1.Condition{Type: t, Status: s, Reason: reason, Message: reason + " message"}
}

func TestSummarizeSandbox(t *testing.T) {
	ws := cond(afev1.WorkspaceReadyCondition, afev1.ReadyReason, true)
	eg := cond(afev1.EgressReadyCondition, afev1.NoEgressReason, true)
	ct := cond(afev1.ContainerReadyCondition, afev1.ReadyReason, true)
	tests := map[string]struct {
		conds       []metav1.Condition
		containerID string
		deleting    bool
		wantPhase   afev1.SandboxPhase
		wantReady   metav1.ConditionStatus
		wantReason  string
	}{
		"new":                    {wantPhase: afev1.SandboxPending, wantReady: metav1.ConditionFalse, wantReason: afev1.ProvisioningReason},
		"all ready":              {conds: []metav1.Condition{ws, eg, ct}, containerID: "c", wantPhase: afev1.SandboxReady, wantReady: metav1.ConditionTrue, wantReason: afev1.ReadyReason},
		"invalid":                {conds: []metav1.Condition{cond(afev1.WorkspaceReadyCondition, afev1.InvalidSpecReason, false)}, wantPhase: afev1.SandboxFailed, wantReady: metav1.ConditionFalse, wantReason: afev1.InvalidSpecReason},
		"denied env":             {conds: []metav1.Condition{ws, eg, cond(afev1.ContainerReadyCondition, afev1.DeniedEnvReason, false)}, wantPhase: afev1.SandboxFailed, wantReady: metav1.ConditionFalse, wantReason: afev1.DeniedEnvReason},
		"pull failed":            {conds: []metav1.Condition{ws, eg, cond(afev1.ContainerReadyCondition, afev1.ImagePullFailedReason, false)}, wantPhase: afev1.SandboxPending, wantReady: metav1.ConditionFalse, wantReason: afev1.ImagePullFailedReason},
		"provisioning":           {conds: []metav1.Condition{ws, eg, cond(afev1.ContainerReadyCondition, afev1.ProvisioningReason, false)}, wantPhase: afev1.SandboxProvisioning, wantReady: metav1.ConditionFalse, wantReason: afev1.ProvisioningReason},
		"lost":                   {conds: []metav1.Condition{ws, eg, cond(afev1.ContainerReadyCondition, afev1.SandboxLostReason, false)}, containerID: "c", wantPhase: afev1.SandboxRecreating, wantReady: metav1.ConditionFalse, wantReason: afev1.SandboxLostReason},
		"suspended":              {conds: []metav1.Condition{ws, eg, cond(afev1.ContainerReadyCondition, afev1.SuspendedReason, false)}, containerID: "c", wantPhase: afev1.SandboxSuspended, wantReady: metav1.ConditionFalse, wantReason: afev1.SuspendedReason},
		"suspended with egress":  {conds: []metav1.Condition{ws, cond(afev1.EgressReadyCondition, afev1.SuspendedReason, false), cond(afev1.ContainerReadyCondition, afev1.SuspendedReason, false)}, containerID: "c", wantPhase: afev1.SandboxSuspended, wantReady: metav1.ConditionFalse, wantReason: afev1.SuspendedReason},
		"suspended, engine away": {conds: []metav1.Condition{ws, cond(afev1.EgressReadyCondition, afev1.EngineUnavailableReason, false), cond(afev1.ContainerReadyCondition, afev1.SuspendedReason, false)}, containerID: "c", wantPhase: afev1.SandboxSuspended, wantReady: metav1.ConditionFalse, wantReason: afev1.SuspendedReason},
		"past its deadline":      {conds: []metav1.Condition{ws, eg, cond(afev1.ContainerReadyCondition, afev1.DeadlineExceededReason, false)}, containerID: "c", wantPhase: afev1.SandboxFailed, wantReady: metav1.ConditionFalse, wantReason: afev1.DeadlineExceededReason},
		"drift":                  {conds: []metav1.Condition{ws, eg, cond(afev1.ContainerReadyCondition, afev1.SpecChangedReason, false)}, containerID: "c", wantPhase: afev1.SandboxRecreating, wantReady: metav1.ConditionFalse, wantReason: afev1.SpecChangedReason},
		"engine down":            {conds: []metav1.Condition{ws, eg, cond(afev1.ContainerReadyCondition, afev1.EngineUnavailableReason, false)}, containerID: "c", wantPhase: afev1.SandboxPending, wantReady: metav1.ConditionFalse, wantReason: afev1.EngineUnavailableReason},
		"engine down at start":   {conds: []metav1.Condition{cond(afev1.ContainerReadyCondition, afev1.EngineUnavailableReason, false)}, wantPhase: afev1.SandboxPending, wantReady: metav1.ConditionFalse, wantReason: afev1.EngineUnavailableReason},
		"name conflict":          {conds: []metav1.Condition{ws, eg, cond(afev1.ContainerReadyCondition, afev1.NameConflictReason, false)}, wantPhase: afev1.SandboxFailed, wantReady: metav1.ConditionFalse, wantReason: afev1.NameConflictReason},
		"deleting":               {conds: []metav1.Condition{ws, eg, ct}, containerID: "c", deleting: true, wantPhase: afev1.SandboxTerminating, wantReady: metav1.ConditionFalse, wantReason: afev1.DeletingReason},
		"invalid later part":     {conds: []metav1.Condition{cond(afev1.ContainerReadyCondition, afev1.DeniedEnvReason, false)}, wantPhase: afev1.SandboxFailed, wantReady: metav1.ConditionFalse, wantReason: afev1.DeniedEnvReason},
		"waiting on part":        {conds: []metav1.Condition{ws}, wantPhase: afev1.SandboxProvisioning, wantReady: metav1.ConditionFalse, wantReason: afev1.ProvisioningReason},
	}
	now := metav1.NewTime(time.Unix(1000, 0))
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			st := afev1.SandboxStatus{Conditions: append([]metav1.Condition{}, tc.conds...), ContainerID: tc.containerID}
			SummarizeSandbox(&st, 3, tc.deleting, now)
			ready := meta.FindStatusCondition(st.Conditions, afev1.SandboxReadyCondition)
			got := []any{st.Phase, ready.Status, ready.Reason, ready.ObservedGeneration}
			want := []any{tc.wantPhase, tc.wantReady, tc.wantReason, int64(3)}
			if d := cmp.Diff(want, got); d != "" {
				t.Fatal(d)
			}
			if (st.ReadyTime != nil) != (tc.wantReady == metav1.ConditionTrue) {
				t.Fatalf("readyTime = %v", st.ReadyTime)
			}
		})
	}
}

func TestReadyTimeIsKeptWhileReady(t *testing.T) {
	first := metav1.NewTime(time.Unix(1000, 0))
	st := afev1.SandboxStatus{Conditions: []metav1.Condition{
		cond(afev1.WorkspaceReadyCondition, afev1.ReadyReason, true),
		cond(afev1.EgressReadyCondition, afev1.NoEgressReason, true),
		cond(afev1.ContainerReadyCondition, afev1.ReadyReason, true),
	}}
	SummarizeSandbox(&st, 1, false, first)
	SummarizeSandbox(&st, 1, false, metav1.NewTime(time.Unix(2000, 0)))
	if !st.ReadyTime.Equal(&first) {
		t.Fatalf("readyTime moved to %v", st.ReadyTime)
	}
}
