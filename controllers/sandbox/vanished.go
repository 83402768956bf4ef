package sandbox

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/sandboxspec"
)

// A Sandbox whose finalizer this process wrote can still go without a
// reconcile of its deletion: the API server checks the finalizers when a
// delete begins, so a delete that began before the finalizer's write (the
// Sandbox just served from a pool, Ready before its finalizer) removes it
// at once all the same, and the cache goes from the Sandbox with its
// finalizer to none. The reconcile that then finds it gone removes its
// objects from the copy remembered here. Only after a crash in between is
// it left to the sweep (loops.Sweeper).

// finalizedCopies holds, by name, the Sandboxes whose finalizer this
// process wrote and has not seen through their deletion.
type finalizedCopies struct{ m sync.Map }

// remember keeps the Sandbox as this reconcile wrote its finalizer.
func (f *finalizedCopies) remember(sbx *afev1.Sandbox) {
	f.m.Store(types.NamespacedName{Namespace: sbx.Namespace, Name: sbx.Name}, sbx.DeepCopy())
}

// take returns and drops the copy kept of the Sandbox of that name; nil:
// none.
func (f *finalizedCopies) take(name types.NamespacedName) *afev1.Sandbox {
	v, ok := f.m.LoadAndDelete(name)
	if !ok {
		return nil
	}
	return v.(*afev1.Sandbox)
}

// forget drops the copy of the Sandbox of that name when it is the UID's
// (a newer Sandbox of the name keeps its own).
func (f *finalizedCopies) forget(name types.NamespacedName, uid types.UID) {
	if v, ok := f.m.Load(name); ok && v.(*afev1.Sandbox).UID == uid {
		f.m.CompareAndDelete(name, v)
	}
}

// vanished removes the objects of a Sandbox found gone whose finalizer this
// process wrote and whose deletion no reconcile saw (see above): found by
// its UID and checked in their roles, as on any deletion.
func (r *Reconciler) vanished(ctx context.Context, name types.NamespacedName) error {
	sbx := r.mem.finalized.take(name)
	if sbx == nil || r.mem.wasFinalized(sbx.UID) {
		return nil
	}
	s := &sandboxScope{sbx: sbx, before: sbx.DeepCopy(), id: sandboxspec.IdentityOf(sbx, r.Config.Instance)}
	if err := r.removeObjects(ctx, s); err != nil {
		r.mem.finalized.remember(sbx) // looked at again with the error's retry
		return err
	}
	logf.FromContext(ctx).Info("Removed the Docker objects of a Sandbox gone without a reconcile of its deletion", "uid", sbx.UID)
	r.forget(sbx.UID)
	r.mem.rememberFinalized(sbx.UID)
	return nil
}
