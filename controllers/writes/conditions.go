package writes

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// SetCondition sets a condition of obj's status, at obj's generation; its
// transition time moves only when its status changes.
func SetCondition[T *afev1.Sandbox | *afev1.Ticket | *afev1.Run | *afev1.SandboxPool](obj T, condType string, ok bool, reason, message string) {
	c := metav1.Condition{Type: condType, Status: metav1.ConditionFalse, Reason: reason, Message: message}
	if ok {
		c.Status = metav1.ConditionTrue
	}
	switch o := any(obj).(type) {
	case *afev1.Sandbox:
		c.ObservedGeneration = o.Generation
		meta.SetStatusCondition(&o.Status.Conditions, c)
	case *afev1.Ticket:
		c.ObservedGeneration = o.Generation
		meta.SetStatusCondition(&o.Status.Conditions, c)
	case *afev1.Run:
		c.ObservedGeneration = o.Generation
		meta.SetStatusCondition(&o.Status.Conditions, c)
	case *afev1.SandboxPool:
		c.ObservedGeneration = o.Generation
		meta.SetStatusCondition(&o.Status.Conditions, c)
	}
}
