// Package activity remembers when a command was last seen starting or
// ending in each sandbox's container, from the engine's exec events: the
// engine's event source fills it, the Sandbox reconciler reads it for its
// idle timeout.
package activity

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Log holds, by Sandbox UID, when a command was last seen starting
// or ending in the sandbox's container, from the engine's exec events. It
// is memory only: the Sandbox reconciler writes it into
// status.lastActivityTime, which is what survives a restart.
type Log struct {
	m sync.Map // string UID -> time.Time
}

// Saw records activity at t.
func (a *Log) Saw(uid string, t time.Time) {
	if a == nil || uid == "" {
		return
	}
	for {
		old, loaded := a.m.LoadOrStore(uid, t)
		if !loaded || !t.After(old.(time.Time)) || a.m.CompareAndSwap(uid, old, t) {
			return
		}
	}
}

// Last is the latest activity seen, zero when none.
func (a *Log) Last(uid types.UID) time.Time {
	if a == nil {
		return time.Time{}
	}
	if v, ok := a.m.Load(string(uid)); ok {
		return v.(time.Time)
	}
	return time.Time{}
}

// Forget drops a deleted Sandbox's record.
func (a *Log) Forget(uid types.UID) {
	if a != nil {
		a.m.Delete(string(uid))
	}
}
