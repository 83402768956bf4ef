// Package poolsync holds, in memory, what the Sandbox and SandboxPool
// reconcilers share of each warm pool: its turn (Turns: one claim or
// removal of its members at a time), the claims and misses its status has
// not counted yet (Counts), and the cold creations in flight that its
// refill makes room for (InFlight).
package poolsync

import (
	"sync"
	"sync/atomic"
)

// Counts are the claims and misses of each pool that its status does
// not hold yet: the Sandbox reconciler adds them, the SandboxPool
// reconciler takes them into the status it writes anyway (no write of its
// own per claim). What a crash takes between the two is not counted.
type Counts struct {
	mu sync.Mutex
	m  map[string][2]int64
}

// Add counts claims and misses of the pool namespace/name. A nil one
// counts nothing.
func (c *Counts) Add(namespace, name string, claims, misses int64) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string][2]int64{}
	}
	n := c.m[namespace+"/"+name]
	c.m[namespace+"/"+name] = [2]int64{n[0] + claims, n[1] + misses}
}

// Take returns the pool's counts and forgets them; Add them back when
// they could not be written.
func (c *Counts) Take(namespace, name string) (claims, misses int64) {
	if c == nil {
		return 0, 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.m[namespace+"/"+name]
	delete(c.m, namespace+"/"+name)
	return n[0], n[1]
}

// Turns serialize, per pool, what binds or removes its unclaimed
// members: a Sandbox's claim (its record and rename) and the pool's own
// removals. The engine's rename is no lock between claims in flight at
// once (internal/pool: claim.go), and a removal by ID racing a rename
// would remove a container just claimed.
type Turns struct{ m sync.Map }

// Lock takes the turn of the pool namespace/name and returns its unlock.
// A nil Turns (a reconciler made by a test alone) gives no turn.
func (t *Turns) Lock(namespace, name string) (unlock func()) {
	if t == nil {
		return func() {}
	}
	mu, _ := t.m.LoadOrStore(namespace+"/"+name, &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	return mu.(*sync.Mutex).Unlock
}

// InFlight counts creations in flight: the cold sandbox creations the
// refill of pools makes room for. A nil one counts nothing.
type InFlight struct{ n atomic.Int64 }

// Start counts one more and returns its end.
func (f *InFlight) Start() (end func()) {
	if f == nil {
		return func() {}
	}
	f.n.Add(1)
	return func() { f.n.Add(-1) }
}

// Count is how many are in flight.
func (f *InFlight) Count() int {
	if f == nil {
		return 0
	}
	return int(f.n.Load())
}
