package telemetry

import (
	"sort"
	"sync"
	"time"
)

// Executions holds, by Sandbox UID, the commands the controller executes in
// each sandbox (Runs, execs through the API), running or ended lately, with
// their times: what names the commands running when an egress request was
// made. Memory only, bounded: per sandbox the running ones and the last
// maxEnded ended ones, none ended more than keepEnded ago, and at most
// maxSandboxes sandboxes. A nil *Executions keeps nothing.
type Executions struct {
	mu sync.Mutex
	m  map[string][]execution
}

type execution struct {
	id         int64
	name       string
	start, end time.Time // end zero: running
}

const (
	maxEnded     = 64
	keepEnded    = 10 * time.Minute
	maxSandboxes = 4096
	// slack is how far apart two clocks' readings of the same moment may
	// be (squid's, to the millisecond, and the manager's).
	slack = 5 * time.Millisecond
)

var nextID struct {
	sync.Mutex
	n int64
}

// Start records that name ("Run/NAME", "exec/ID") started at in the
// sandbox; the function returned records its end.
func (e *Executions) Start(uid, name string, at time.Time) func(end time.Time) {
	if e == nil || uid == "" {
		return func(time.Time) {}
	}
	nextID.Lock()
	nextID.n++
	id := nextID.n
	nextID.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m == nil {
		e.m = map[string][]execution{}
	}
	if _, ok := e.m[uid]; !ok && len(e.m) >= maxSandboxes {
		e.prune(at)
		if len(e.m) >= maxSandboxes {
			clear(e.m)
		}
	}
	e.m[uid] = append(e.m[uid], execution{id: id, name: name, start: at})
	return func(end time.Time) { e.end(uid, id, end) }
}

func (e *Executions) end(uid string, id int64, at time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	list := e.m[uid]
	for i := range list {
		if list[i].id == id {
			list[i].end = at
		}
	}
	// The last maxEnded ended ones stay, and every running one.
	var ended int
	for i := len(list) - 1; i >= 0; i-- {
		if !list[i].end.IsZero() {
			ended++
			if ended > maxEnded {
				list = append(list[:i], list[i+1:]...)
			}
		}
	}
	e.m[uid] = list
}

// prune drops the executions ended more than keepEnded before now, and the
// sandboxes left with none.
func (e *Executions) prune(now time.Time) {
	for uid, list := range e.m {
		kept := list[:0]
		for _, x := range list {
			if x.end.IsZero() || now.Sub(x.end) < keepEnded {
				kept = append(kept, x)
			}
		}
		if len(kept) == 0 {
			delete(e.m, uid)
		} else {
			e.m[uid] = kept
		}
	}
}

// During names the executions of the sandbox that ran at some time from
// from to to (a request's start and end), sorted; none when none did.
func (e *Executions) During(uid string, from, to time.Time) []string {
	if e == nil {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, x := range e.m[uid] {
		if x.start.After(to.Add(slack)) || !x.end.IsZero() && x.end.Add(slack).Before(from) {
			continue
		}
		out = append(out, x.name)
	}
	sort.Strings(out)
	return out
}
