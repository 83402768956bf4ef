package shared

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/docker"
)

// ActivityLog holds, by Sandbox UID, when a command was last seen starting
// or ending in the sandbox's container, from the engine's exec events. It
// is memory only: the Sandbox reconciler writes it into
// status.lastActivityTime, which is what survives a restart.
type ActivityLog struct {
	m sync.Map // string UID -> time.Time
}

// Saw records activity at t.
func (a *ActivityLog) Saw(uid string, t time.Time) {
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
func (a *ActivityLog) Last(uid types.UID) time.Time {
	if a == nil {
		return time.Time{}
	}
	if v, ok := a.m.Load(string(uid)); ok {
		return v.(time.Time)
	}
	return time.Time{}
}

// Forget drops a deleted Sandbox's record.
func (a *ActivityLog) Forget(uid types.UID) {
	if a != nil {
		a.m.Delete(string(uid))
	}
}

// IsSandboxExec is true for an exec event of a sandbox container or of a
// pool member, which serves a sandbox once claimed (not a proxy's): the
// labels are the container's, as the engine reports them.
func IsSandboxExec(ev docker.Event) bool {
	role := ev.Labels[afev1.LabelRole]
	return (ev.Action == docker.ActionExecStart || ev.Action == docker.ActionExecDie) &&
		(role == afev1.RoleSandbox || role == afev1.RoleMember)
}
