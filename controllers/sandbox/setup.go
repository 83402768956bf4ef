package sandbox

import (
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/controllers/identity"
	"afe.dev/sandbox/controllers/writes"
)

// SetupWithManager registers the reconciler: Sandboxes (spec changes and
// deletion, not our own status writes) and Docker container events.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr).
		For(&afev1.Sandbox{}, builder.WithPredicates(writes.SpecOrDeletionChanged(statusForgeable(&r.mem.written)))).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(1, r.Config.MaxConcurrentReconciles)}).
		Named("sandbox")
	// Both sides of a Folder workspace conflict look again when either
	// changes.
	b = b.Watches(&afev1.Sandbox{}, handler.EnqueueRequestsFromMapFunc(r.folderNeighbours), builder.WithPredicates(folderChanged()))
	// A new Run resumes a suspended sandbox; the end of one restarts the
	// idle timer.
	b = b.Watches(&afev1.Run{}, handler.EnqueueRequestsFromMapFunc(r.sandboxOfRun), builder.WithPredicates(runStartedOrEnded()))
	if r.DockerEvents != nil {
		b = b.WatchesRawSource(source.Channel(r.DockerEvents, &handler.TypedEnqueueRequestForObject[*afev1.Sandbox]{}))
	}
	return b.Complete(r)
}

// statusForgeable passes the status-only updates of a Sandbox that may be
// forged (anyone granted sandboxes/status can write it): a status naming
// another object than the Sandbox's own, or a changed container ID other
// than the one this manager wrote. The reconcile writes those fields again
// at once; the sweep is the fallback. A changed status.node passes too: in
// per-node mode the node a ticket moved off removes what it ran once the
// sandbox runs on the next (move.go).
func statusForgeable(own *writtenIDs) func(old, obj client.Object) bool {
	return func(o, n client.Object) bool {
		old, okOld := o.(*afev1.Sandbox)
		sbx, okNew := n.(*afev1.Sandbox)
		return okOld && okNew && (identity.StatusNamesForeign(sbx) ||
			old.Status.ContainerID != sbx.Status.ContainerID && !own.wrote(sbx.UID, sbx.Status.ContainerID) ||
			old.Status.Node != sbx.Status.Node)
	}
}

// runStartedOrEnded passes the creation and deletion of a Run and changes of
// its phase.
func runStartedOrEnded() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			old, okOld := e.ObjectOld.(*afev1.Run)
			run, okNew := e.ObjectNew.(*afev1.Run)
			return okOld && okNew && old.Status.Phase != run.Status.Phase
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}
