package sandbox

import (
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// A container that exits soon after its start, again and again (a command
// that fails at once, or a workload that exits on purpose), would otherwise
// be recreated at the engine's own pace, its workspace wiped and its ticket
// requeued each time. Its recreations are spaced instead, as the kubelet
// spaces a crash-looping container's restarts.
const (
	// crashWindow is how soon after its start a container's exit counts
	// as a crash; one that ran longer ends a run of crashes.
	crashWindow = 10 * time.Second
	// crashBaseDelay is the wait before the second recreation in a row;
	// it doubles with each further crash, up to crashMaxDelay.
	crashBaseDelay = 10 * time.Second
	crashMaxDelay  = 5 * time.Minute
)

// crashBackoff holds, per sandbox UID, its run of crashes. It lives in
// memory: a manager restart forgets it, which costs one recreation without
// delay, and no tenant-writable field can shorten it.
type crashBackoff struct {
	mu      sync.Mutex
	crashes map[types.UID]crashRun
}

type crashRun struct {
	count     int
	notBefore time.Time
	uptime    time.Duration
}

// lost records a loss of a container that started at started (zero when it
// never did) and ended by now. A loss that is no crash (a container that ran
// for crashWindow or more, or one that disappeared) ends the run.
func (b *crashBackoff) lost(uid types.UID, started, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.crashes == nil {
		b.crashes = map[types.UID]crashRun{}
	}
	uptime := now.Sub(started)
	if started.IsZero() || uptime >= crashWindow {
		delete(b.crashes, uid)
		return
	}
	run := b.crashes[uid]
	run.count++
	run.uptime = uptime
	run.notBefore = now.Add(crashDelay(run.count))
	b.crashes[uid] = run
}

// crashDelay is the wait before the replacement after count crashes in a
// row: none after the first.
func crashDelay(count int) time.Duration {
	if count < 2 {
		return 0
	}
	d := crashBaseDelay
	for i := 2; i < count && d < crashMaxDelay; i++ {
		d *= 2
	}
	return min(d, crashMaxDelay)
}

// wait is how long the replacement must still wait at now, with the reason
// in words; zero when it may be made.
func (b *crashBackoff) wait(uid types.UID, now time.Time) (time.Duration, string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	run, ok := b.crashes[uid]
	if !ok || !now.Before(run.notBefore) {
		return 0, ""
	}
	d := run.notBefore.Sub(now)
	return d, fmt.Sprintf("The container exited %s after its start, %d times in a row; "+
		"it is recreated with a fresh workspace in %s (crash-loop back-off)",
		run.uptime.Round(time.Second), run.count, d.Round(time.Second))
}

// forget drops the sandbox's run, once the sandbox is gone.
func (b *crashBackoff) forget(uid types.UID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.crashes, uid)
}
