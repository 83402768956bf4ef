package writes

import (
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Written remembers, per object, the version a reconcile's write replaced,
// so that the next reconcile can tell a cached copy older than its own
// write and wait for the newer one instead of acting on it: a write from a
// stale copy fails with a Conflict (one more request to the API server, a
// retry after StaleRetry) and a create of what is not yet in the cache
// fails with AlreadyExists. Only versions are compared for equality, never
// ordered. The zero value is ready for use.
type Written struct {
	mu sync.Mutex
	// replaced holds, per UID, the resourceVersions of the copies this
	// process's writes replaced since it last saw a newer one.
	replaced map[types.UID][]string
	// created holds the objects a reconcile created, until the cache
	// holds them or createdFor has passed.
	created map[types.NamespacedName]time.Time
}

// createdFor is how long a created object missing from the cache is taken
// as created; past it the cache would have caught up, or it was deleted.
const createdFor = 10 * time.Second

// Replaced records that a write replaced the version rv of the object uid;
// only a write that changed the version may be recorded, or the copy the
// cache holds would be taken as stale for good.
func (w *Written) Replaced(uid types.UID, rv string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.replaced == nil {
		w.replaced = map[types.UID][]string{}
	}
	w.replaced[uid] = append(w.replaced[uid], rv)
}

// Stale tells whether obj is a copy this process has already written
// over; a newer copy ends the watch for it.
func (w *Written) Stale(obj client.Object) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	rvs, ok := w.replaced[obj.GetUID()]
	if ok && !slices.Contains(rvs, obj.GetResourceVersion()) {
		delete(w.replaced, obj.GetUID())
		return false
	}
	return ok
}

// Forget drops what is recorded of an object gone.
func (w *Written) Forget(uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.replaced, uid)
}

// Created records that key was created at now.
func (w *Written) Created(key types.NamespacedName, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.created == nil {
		w.created = map[types.NamespacedName]time.Time{}
	}
	w.created[key] = now
}

// RecentlyCreated tells whether key, which the cache does not hold yet,
// was created by this process less than createdFor before now.
func (w *Written) RecentlyCreated(key types.NamespacedName, now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	at, ok := w.created[key]
	if ok && now.Sub(at) >= createdFor {
		delete(w.created, key)
		return false
	}
	return ok
}

// Seen drops the creation of key once the cache holds it.
func (w *Written) Seen(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.created, key)
}
