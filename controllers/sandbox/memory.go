package sandbox

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"afe.dev/sandbox/docker"
)

// memory is what the reconciler remembers of each Sandbox between two
// reconciles, by UID, in this process only: a restart forgets it, which
// costs at most one extra look at the engine, and nothing a tenant may
// write feeds it. All of it goes with the Sandbox (forget).
type memory struct {
	// written is the container ID each Sandbox's status was last given by
	// this manager: its own write of it is no reason to look again.
	written writtenIDs
	// crashes spaces the recreations of crash-looping containers.
	crashes crashBackoff
	// moves spaces the transfers of a moved workspace that does not
	// settle.
	moves moveAttempts
	// admitted is the allowlist this manager gave each proxy since its
	// start: no need to ask the proxy again.
	admitted admittedLists
	// legacyChecked holds the UIDs whose legacy-named proxy and network
	// (docs/upgrade.md) this process has looked for.
	legacyChecked sync.Map
	// egressGone holds the UIDs of sandboxes without egress whose proxy and
	// network this process has seen gone from the engine (never a status
	// field: a tenant may write those).
	egressGone sync.Map
	// finalizedAt holds the UIDs whose finalizer this process removed, with
	// the time: the Docker events of that removal queue the Sandbox again
	// while the cache still shows it (even as it was before its deletion),
	// and there is nothing left to do. It is the one record that outlives
	// the Sandbox, for finalizedMemory.
	finalizedAt sync.Map
	// finalized holds, by name, the Sandboxes whose finalizer this process
	// wrote, until their deletion is seen through (vanished.go).
	finalized finalizedCopies
}

// finalizedMemory is how long a finalized UID is remembered.
const finalizedMemory = time.Minute

// forget drops what the reconciler and the engine's event source remember
// of a Sandbox that is gone: called on every path where one goes.
func (r *Reconciler) forget(uid types.UID) {
	r.mem.written.forget(uid)
	r.mem.crashes.forget(uid)
	r.mem.moves.forget(uid)
	r.mem.admitted.forget(uid)
	r.mem.legacyChecked.Delete(uid)
	r.mem.egressGone.Delete(uid)
	r.Activity.Forget(uid)
}

// rememberFinalized records that this process removed the Sandbox's
// finalizer, and drops the records older than finalizedMemory.
func (m *memory) rememberFinalized(uid types.UID) {
	now := time.Now()
	m.finalizedAt.Store(uid, now)
	m.finalizedAt.Range(func(k, v any) bool {
		if now.Sub(v.(time.Time)) > finalizedMemory {
			m.finalizedAt.Delete(k)
		}
		return true
	})
}

// wasFinalized tells whether this process removed the Sandbox's finalizer
// within finalizedMemory.
func (m *memory) wasFinalized(uid types.UID) bool {
	_, ok := m.finalizedAt.Load(uid)
	return ok
}

// writtenIDs remembers, by Sandbox UID, the status.containerID this manager
// last wrote.
type writtenIDs struct{ ids sync.Map }

func (w *writtenIDs) record(uid types.UID, id string) { w.ids.Store(uid, id) }

func (w *writtenIDs) forget(uid types.UID) { w.ids.Delete(uid) }

// wrote tells whether id is what this manager last wrote for the Sandbox;
// a nil writtenIDs knows of no write.
func (w *writtenIDs) wrote(uid types.UID, id string) bool {
	if w == nil {
		return false
	}
	got, ok := w.ids.Load(uid)
	return ok && got == id
}

// admittedLists remembers, by Sandbox UID, the allowlist ID this manager
// last gave (or found) the sandbox's proxy, with the proxy's container ID
// and start: a proxy started again has its creation's allowlist, and is
// asked again.
type admittedLists struct{ m sync.Map }

type admission struct {
	container string
	started   time.Time
	id        string
}

func (a *admittedLists) record(uid types.UID, proxy *docker.Container, id string) {
	a.m.Store(uid, admission{container: proxy.ID, started: proxy.StartedAt, id: id})
}

func (a *admittedLists) forget(uid types.UID) { a.m.Delete(uid) }

// holds tells whether the proxy, as it runs now, was given the allowlist
// id by this manager.
func (a *admittedLists) holds(uid types.UID, proxy *docker.Container, id string) bool {
	got, ok := a.m.Load(uid)
	return ok && got == admission{container: proxy.ID, started: proxy.StartedAt, id: id}
}
