package writes

import (
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// SpecOrDeletionChanged passes, for any of the three kinds, creations,
// spec (generation) changes, deletion, finalizer changes and a change of the
// resume annotation, but not status-only updates; except those that status
// says matter (nil: none), for the status fields a reconcile must write
// again at once because anyone granted the status may forge them.
func SpecOrDeletionChanged(status func(old, obj client.Object) bool) predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			if e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() {
				return true
			}
			if !e.ObjectNew.GetDeletionTimestamp().Equal(e.ObjectOld.GetDeletionTimestamp()) {
				return true
			}
			if len(e.ObjectNew.GetFinalizers()) != len(e.ObjectOld.GetFinalizers()) {
				return true
			}
			if e.ObjectNew.GetAnnotations()[afev1.ResumeRequestedAnnotation] != e.ObjectOld.GetAnnotations()[afev1.ResumeRequestedAnnotation] {
				return true
			}
			return status != nil && status(e.ObjectOld, e.ObjectNew)
		},
	}
}
