package run

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/docker"
)

// listing is what the slow engine answers to one list of a group's
// processes: after delay (unless the caller stops waiting first), the
// number of live processes, or err.
type listing struct {
	delay time.Duration
	left  int
	err   error
}

// slowEngine is an engine that answers lists of processes as it is told
// (the last answer again once they are used up), and records what the
// sweep asked of it: "list", "kill", "remove".
type slowEngine struct {
	Engine // any other method is not the sweep's: it panics

	stopped bool
	lists   []listing

	mu  sync.Mutex
	ops []string
}

func (e *slowEngine) op(name string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ops = append(e.ops, name)
	n := 0
	for _, o := range e.ops {
		if o == name {
			n++
		}
	}
	return n
}

func (e *slowEngine) InspectContainer(context.Context, string) (*docker.Container, error) {
	return &docker.Container{ID: "c", Running: !e.stopped}, nil
}

func (e *slowEngine) RemoveContainer(context.Context, string) error {
	e.op("remove")
	return nil
}

func (e *slowEngine) Exec(_ context.Context, _ string, spec docker.ExecSpec) (int, error) {
	if !slices.Contains(spec.Cmd, "afe-kill") {
		return -1, errors.New("the sweep executes nothing but the kill")
	}
	e.op("kill")
	return 0, nil
}

func (e *slowEngine) GroupProcesses(ctx context.Context, _ string, gid int) ([]docker.Process, error) {
	l := e.lists[min(e.op("list"), len(e.lists))-1]
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(l.delay):
	}
	if l.err != nil {
		return nil, l.err
	}
	return slices.Repeat([]docker.Process{{PID: 7, RGID: gid, EGID: gid, SGID: gid, State: "S"}}, l.left), nil
}

// TestSweepWaitsForASlowEngine: the sweep after a Run's end waits for the
// engine's answer within sweepPatience, one list at a time and without
// trying a failing one again at once, kills what it finds, and removes the
// container only when the engine could not count the Run's processes by
// then (or when they survive every kill).
func TestSweepWaitsForASlowEngine(t *testing.T) {
	patience := sweepPatience
	sweepPatience = 4 * time.Second
	t.Cleanup(func() { sweepPatience = patience })
	failing := listing{delay: 10 * time.Millisecond, err: errors.New("exec in c: context deadline exceeded")}
	cases := map[string]struct {
		lists   []listing
		unclean bool
		stopped bool
		// ops are the first of the sweep's requests to the engine.
		ops     []string
		removed bool
		// within bounds the sweep's duration, and atLeast its waits.
		within, atLeast time.Duration
	}{
		"one look when nothing is left": {
			lists: []listing{{}}, ops: []string{"list"}, within: time.Second,
		},
		"a list slower than 10 s on a loaded host is waited for, not cut short and tried again": {
			lists: []listing{{delay: 2 * time.Second}}, ops: []string{"list"}, within: 3 * time.Second,
		},
		"a failing list is tried again after a wait, and then counts": {
			lists: []listing{failing, failing, {}}, ops: []string{"list", "list", "list"},
			atLeast: sweepRetry + 2*sweepRetry, within: 4 * time.Second,
		},
		"a stopped container has nothing left": {
			lists: []listing{failing}, stopped: true, ops: []string{"list"}, within: time.Second,
		},
		"an unclean end is killed first and needs two clean lists": {
			lists: []listing{{}}, unclean: true, ops: []string{"kill", "list", "list"}, within: time.Second,
		},
		"what is found is killed as at a deadline": {
			lists: []listing{{left: 1}, {}}, ops: []string{"list", "kill", "list", "list"}, within: time.Second,
		},
		"survivors of every kill go with the container": {
			lists: []listing{{left: 1}}, ops: []string{"list", "kill", "list"}, removed: true, within: KillGrace + time.Second,
		},
		"an engine that cannot list by the end of the patience loses the container": {
			lists: []listing{failing}, ops: []string{"list", "list", "list", "kill"}, removed: true,
			atLeast: sweepRetry + 2*sweepRetry + KillGrace - killRound, within: 4*time.Second + KillGrace + time.Second,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := &slowEngine{lists: tc.lists, stopped: tc.stopped}
			r := &Reconciler{Engine: e}
			run := &afev1.Run{Spec: afev1.RunSpec{Command: []string{"true"}}}
			t0 := time.Now()
			removed := r.sweepAttempt(context.Background(), run, &attempt{container: "c", containerID: "c", gid: 2_000_000_001, sandboxGID: 1000}, 1000, tc.unclean)
			took := time.Since(t0)
			e.mu.Lock()
			ops := e.ops
			e.mu.Unlock()
			if removed != tc.removed || slices.Contains(ops, "remove") != tc.removed {
				t.Errorf("removed %v, want %v (requests %s)", removed, tc.removed, strings.Join(ops, " "))
			}
			if diff := cmp.Diff(tc.ops, ops[:min(len(tc.ops), len(ops))]); diff != "" {
				t.Errorf("first requests (-want +got):\n%s\nall: %s", diff, strings.Join(ops, " "))
			}
			if n := strings.Count(strings.Join(ops, " "), "list"); n > 60 {
				t.Errorf("%d lists: a slow engine is asked again and again (%s)", n, strings.Join(ops, " "))
			}
			if took > tc.within || took < tc.atLeast {
				t.Errorf("the sweep took %s, want %s to %s", took, tc.atLeast, tc.within)
			}
		})
	}
}

// TestSweepKillsWithItsPatience: what the sweep after a Run's end found is
// killed, and the lists after the kill are waited for within the sweep's
// patience, not cut at KillGrace as at a deadline: a process already killed
// is not counted a survivor, and its container not removed, because the
// engine was slow to say so (under gVisor on a loaded host).
func TestSweepKillsWithItsPatience(t *testing.T) {
	patience := sweepPatience
	sweepPatience = KillGrace + 4*time.Second
	t.Cleanup(func() { sweepPatience = patience })
	e := &slowEngine{lists: []listing{{left: 1}, {delay: KillGrace + time.Second}, {}}}
	r := &Reconciler{Engine: e}
	run := &afev1.Run{Spec: afev1.RunSpec{Command: []string{"true"}}}
	removed := r.sweepAttempt(context.Background(), run, &attempt{container: "c", containerID: "c", gid: 2_000_000_001, sandboxGID: 1000}, 1000, false)
	e.mu.Lock()
	defer e.mu.Unlock()
	if removed || slices.Contains(e.ops, "remove") {
		t.Errorf("the container was removed (requests %s)", strings.Join(e.ops, " "))
	}
	if diff := cmp.Diff([]string{"list", "kill", "list", "list"}, e.ops); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}
