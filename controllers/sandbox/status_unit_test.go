package sandbox

import (
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/metrics"
)

// A loss in the very second the sandbox became Ready (status times are
// kept to the second) is a recovery all the same; a resume is none.
func TestObserveReadyCountsRecoveries(t *testing.T) {
	second := metav1.NewTime(time.Now().Truncate(time.Second))
	notReady := func(containerReason string) *afev1.Sandbox {
		return &afev1.Sandbox{Status: afev1.SandboxStatus{ReadyTime: &second, LastLostTime: &second, Conditions: []metav1.Condition{
			{Type: afev1.ContainerReadyCondition, Status: metav1.ConditionFalse, Reason: containerReason},
			{Type: afev1.SandboxReadyCondition, Status: metav1.ConditionFalse, Reason: containerReason},
		}}}
	}
	tests := map[string]struct {
		before *afev1.Sandbox
		want   uint64
	}{
		"a loss in the second of Ready": {before: notReady(afev1.SandboxLostReason), want: 1},
		"a resume":                      {before: notReady(afev1.SuspendedReason), want: 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			after := tc.before.DeepCopy()
			for i := range after.Status.Conditions {
				after.Status.Conditions[i].Status = metav1.ConditionTrue
			}
			was := recoveries(t)
			observeReady(tc.before, after, metav1.NewTime(second.Add(300*time.Millisecond)))
			if got := recoveries(t) - was; got != tc.want {
				t.Fatalf("recoveries observed: %d, want %d", got, tc.want)
			}
		})
	}
}

func recoveries(t *testing.T) uint64 {
	t.Helper()
	var m dto.Metric
	if err := metrics.SandboxRecovered.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}
