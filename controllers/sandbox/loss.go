package sandbox

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// lossRecorded is true while the status holds a loss whose replacement is
// not Ready yet: its ContainerReady condition says SandboxLost.
func lossRecorded(sbx *afev1.Sandbox) bool {
	c := meta.FindStatusCondition(sbx.Status.Conditions, afev1.ContainerReadyCondition)
	return c != nil && c.Reason == afev1.SandboxLostReason && c.Status != metav1.ConditionTrue
}
