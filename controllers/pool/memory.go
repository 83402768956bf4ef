package pool

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// making is what this process remembers of the member creations: those in
// flight (per pool, and their names, whose volumes keep must leave), when
// each pool last started one, and the failures in a row that hold a pool's
// next creation back.
type making struct {
	mu    sync.Mutex
	pools map[types.UID]*poolMaking
	names map[string]bool
}

type poolMaking struct {
	creating int
	last     time.Time
	// failures in a row, the last one's error and time.
	failures int
	lastErr  error
	failedAt time.Time
}

// refillState is what the refill of one pool decides from.
type refillState struct {
	creating, engine int
	last             time.Time
}

// Failure back-off: the first retry after a second, doubling to at most
// maxBackoff, so that an image that cannot be pulled or a runtime that
// refuses the container is no busy loop.
const maxBackoff = time.Minute

func (m *making) pool(uid types.UID) *poolMaking {
	if m.pools == nil {
		m.pools, m.names = map[types.UID]*poolMaking{}, map[string]bool{}
	}
	p := m.pools[uid]
	if p == nil {
		p = &poolMaking{}
		m.pools[uid] = p
	}
	return p
}

// start records a creation of the pool's member name.
func (m *making) start(uid types.UID, name string, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.pool(uid)
	p.creating++
	p.last = now
	m.names[name] = true
}

// end records its end, and its error.
func (m *making) end(uid types.UID, name string, err error, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.pool(uid)
	p.creating--
	delete(m.names, name)
	if err != nil {
		p.failures++
		p.lastErr, p.failedAt = err, now
	} else {
		p.failures, p.lastErr = 0, nil
	}
}

// state is the pool's creations in flight, the engine's (every pool's),
// and the pool's last start.
func (m *making) state(uid types.UID) refillState {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := refillState{creating: m.pool(uid).creating, last: m.pool(uid).last}
	for _, p := range m.pools {
		st.engine += p.creating
	}
	return st
}

// inFlight is the pool's creations in flight.
func (m *making) inFlight(uid types.UID) int { return m.state(uid).creating }

// isMaking is true while the member of the name is being made.
func (m *making) isMaking(name string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.names[name]
}

// backoff is how long the pool's next creation waits after failures in a
// row; zero when it need not.
func (m *making) backoff(uid types.UID, now time.Time) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.pool(uid)
	if p.failures == 0 {
		return 0
	}
	wait := min(maxBackoff, time.Second<<min(p.failures-1, 6))
	return max(0, p.failedAt.Add(wait).Sub(now))
}

// failure is the error of the pool's last creation when it failed.
func (m *making) failure(uid types.UID) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pool(uid).lastErr
}

// forget drops what is remembered of a pool that is gone.
func (m *making) forget(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.pools, uid)
}
