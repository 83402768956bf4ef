package sandbox

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// maxMoveDelay is the longest wait between two transfers of a sandbox's
// workspace.
const maxMoveDelay = 5 * time.Minute

// moveAttempts holds, per sandbox UID, the transfers of its workspace this
// manager began since the sandbox last settled here, and when the last one
// began. A move that does not settle (its tree refused, a volume of
// another's in the way) is tried again only after a wait that doubles with
// each transfer (moveDelay), whatever queues the sandbox meanwhile: the
// engine's events of each attempt's helpers queue it at once. It lives in
// memory, as crashBackoff does: a restart costs one transfer without delay.
type moveAttempts struct {
	mu sync.Mutex
	m  map[types.UID]moveAttempt
}

// moveAttempt is a sandbox's transfers so far.
type moveAttempt struct {
	count int
	last  time.Time
}

// moveDelay is the wait after count transfers before the next: none
// before the first, moveRetry after it, twice as long after each further
// one, up to maxMoveDelay.
func moveDelay(count int) time.Duration {
	if count <= 0 {
		return 0
	}
	d := moveRetry
	for i := 1; i < count && d < maxMoveDelay; i++ {
		d *= 2
	}
	return min(d, maxMoveDelay)
}

// wait is how long the sandbox's next transfer must still wait at now; 0
// when it may begin.
func (a *moveAttempts) wait(uid types.UID, now time.Time) time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	at, ok := a.m[uid]
	if !ok {
		return 0
	}
	return max(at.last.Add(moveDelay(at.count)).Sub(now), 0)
}

// begin records a transfer of the sandbox's workspace begun at now.
func (a *moveAttempts) begin(uid types.UID, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = map[types.UID]moveAttempt{}
	}
	at := a.m[uid]
	a.m[uid] = moveAttempt{count: at.count + 1, last: now}
}

// forget drops the sandbox's transfers: it settled here, or is gone.
func (a *moveAttempts) forget(uid types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.m, uid)
}
