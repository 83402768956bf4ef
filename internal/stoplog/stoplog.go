// Package stoplog remembers the stops of sandbox containers this manager
// began (a suspension, a deadline), for the Runs whose commands they cut
// short.
package stoplog

import (
	"sync"
	"time"
)

// stopMemory is how long a stop this manager made is remembered.
const stopMemory = time.Minute

// Log remembers, by container ID, when this manager began stopping a
// sandbox's container (a suspension, a deadline). A Run's command that the
// stop cut short ends a moment before the engine reports the container
// stopped, sometimes seconds before on a loaded engine: the Run asks here
// whether its attempt was interrupted rather than guess from the engine's
// state. A nil Log remembers nothing.
type Log struct {
	mu    sync.Mutex
	began map[string]time.Time
}

// Stopping records that the container is about to be stopped.
func (l *Log) Stopping(id string, now time.Time) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.began == nil {
		l.began = map[string]time.Time{}
	}
	for k, t := range l.began {
		if now.Sub(t) > stopMemory {
			delete(l.began, k)
		}
	}
	l.began[id] = now
}

// Started records that the container runs again (a resume).
func (l *Log) Started(id string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.began, id)
}

// Stopped tells whether a stop of the container began within stopMemory
// and it was not started since.
func (l *Log) Stopped(id string, now time.Time) bool {
	if l == nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	began, ok := l.began[id]
	return ok && now.Sub(began) <= stopMemory
}

// StoppedSince tells whether a stop of the container began at or after t.
func (l *Log) StoppedSince(id string, t time.Time) bool {
	if l == nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	began, ok := l.began[id]
	return ok && !began.Before(t)
}
