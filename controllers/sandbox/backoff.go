package sandbox

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"afe.dev/sandbox/internal/plan"
)

// crashBackoff holds, per sandbox UID, its run of crashes (plan.CrashRun),
// which spaces the recreations of a crash-looping container. It lives in
// memory: a manager restart forgets it, which costs one recreation without
// delay, and no tenant-writable field can shorten it.
type crashBackoff struct {
	mu   sync.Mutex
	runs map[types.UID]plan.CrashRun
}

// run is the sandbox's run of crashes; the zero value when none.
func (b *crashBackoff) run(uid types.UID) plan.CrashRun {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.runs[uid]
}

// set remembers the sandbox's run, or forgets it when it is none.
func (b *crashBackoff) set(uid types.UID, run plan.CrashRun) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if run.Count == 0 {
		delete(b.runs, uid)
		return
	}
	if b.runs == nil {
		b.runs = map[types.UID]plan.CrashRun{}
	}
	b.runs[uid] = run
}

// forget drops the sandbox's run, once the sandbox is gone.
func (b *crashBackoff) forget(uid types.UID) { b.set(uid, plan.CrashRun{}) }
