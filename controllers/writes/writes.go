// Package writes holds the writes every reconciler makes to its own
// object, one way for every kind: the finalizer, the status patch with
// the optimistic lock, its conditions, the result a Reconcile returns for
// them, the memory of the versions its writes replaced (Written: no write
// from a stale copy), the deletion of a finished object, and which of the
// object's updates wake a reconcile (SpecOrDeletionChanged: not its own
// status writes).
package writes

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// The writes every reconciler makes to its own object, one way: the
// finalizer and the status are written by patches over the version the
// reconcile read (an optimistic lock), so that a reconcile that started from
// a stale cache fails with a Conflict instead of overwriting what a newer
// one wrote, and what follows a write (an Event, a metric, the start of an
// attempt) happens once.

// StaleRetry is how soon a reconcile that read a stale copy is repeated.
const StaleRetry = 100 * time.Millisecond

// EnsureFinalizer adds the finalizer when obj lacks it. On success obj is
// the server's version, status included.
func EnsureFinalizer(ctx context.Context, c client.Client, obj client.Object, finalizer string) error {
	if controllerutil.ContainsFinalizer(obj, finalizer) {
		return nil
	}
	base := obj.DeepCopyObject().(client.Object)
	controllerutil.AddFinalizer(obj, finalizer)
	if err := c.Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("add finalizer: %w", err)
	}
	return nil
}

// RemoveFinalizer removes the finalizer and tells whether this call did:
// only one write can, and an object already gone is no error. On success
// obj is the server's version, status included.
func RemoveFinalizer(ctx context.Context, c client.Client, obj client.Object, finalizer string) (bool, error) {
	if !controllerutil.ContainsFinalizer(obj, finalizer) {
		return false, nil
	}
	base := obj.DeepCopyObject().(client.Object)
	controllerutil.RemoveFinalizer(obj, finalizer)
	err := c.Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	if err != nil {
		return false, client.IgnoreNotFound(fmt.Errorf("remove finalizer: %w", err))
	}
	return true, nil
}

// PatchStatus writes obj's status when it differs from before's (status
// reads it from either), over the version before was read at, and tells
// whether it wrote. An object being deleted whose finalizer is gone is gone,
// or about to be: nothing is written.
func PatchStatus[T client.Object](ctx context.Context, c client.Client, before, obj T, finalizer string, status func(T) any) (bool, error) {
	if !obj.GetDeletionTimestamp().IsZero() && !controllerutil.ContainsFinalizer(obj, finalizer) {
		return false, nil
	}
	if equality.Semantic.DeepEqual(status(before), status(obj)) {
		return false, nil
	}
	if err := c.Status().Patch(ctx, obj, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return false, fmt.Errorf("patch status: %w", err)
	}
	return true, nil
}

// ReconcileResult is what a Reconcile returns for the result and error of its work
// and the error of its final status write. A Conflict in either means the
// reconcile read a stale copy: it is looked at again after StaleRetry, once
// the cache holds the newer one, without an error. An error is returned
// without a RequeueAfter, which controller-runtime would ignore.
func ReconcileResult(res ctrl.Result, err, writeErr error) (ctrl.Result, error) {
	err = errors.Join(err, writeErr)
	switch {
	case apierrors.IsConflict(err):
		return ctrl.Result{RequeueAfter: StaleRetry}, nil
	case err != nil:
		return ctrl.Result{}, err
	}
	return res, nil
}

// RequeueSooner is res, looked at again after at most after.
func RequeueSooner(res ctrl.Result, after time.Duration) ctrl.Result {
	if res.RequeueAfter == 0 || after < res.RequeueAfter {
		res.RequeueAfter = after
	}
	return res
}

// FinishedTTL is how long a finished object is kept: its own
// ttlSecondsAfterFinished, else the controller's --finished-ttl; ok is
// false when it is kept for good.
func FinishedTTL(own *int32, def time.Duration) (time.Duration, bool) {
	switch {
	case own != nil:
		return time.Duration(*own) * time.Second, true
	case def > 0:
		return def, true
	}
	return 0, false
}

// DeleteExpired deletes the object, only the one read (its UID): its
// finalizers do the cleanup, as for any deletion (no garbage collector is
// relied on).
func DeleteExpired(ctx context.Context, c client.Client, obj client.Object) error {
	uid := obj.GetUID()
	err := c.Delete(ctx, obj, client.Preconditions{UID: &uid})
	if apierrors.IsConflict(err) {
		return nil // another object of the name by now
	}
	return client.IgnoreNotFound(err)
}

// ConflictRetry is how often a name conflict is looked at again.
const ConflictRetry = 30 * time.Second
