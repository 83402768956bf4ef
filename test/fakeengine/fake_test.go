package fakeengine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/test/fakeengine"
)

func TestFaultsFailTheCallsTheyName(t *testing.T) {
	ctx := context.Background()
	pull := &docker.PullError{Ref: image, Reason: "registry unreachable"}
	cases := map[string]struct {
		fault fakeengine.Fault
		call  func(e *fakeengine.Engine) error
		want  error
	}{
		"a name taken": {
			fault: fakeengine.Fault{Op: fakeengine.OpRunContainer, Target: "ctr-c", Err: docker.ErrConflict},
			call:  func(e *fakeengine.Engine) error { _, err := e.RunContainer(ctx, spec("ctr-c")); return err },
			want:  docker.ErrConflict,
		},
		"not found": {
			fault: fakeengine.Fault{Op: fakeengine.OpInspectVolume, Err: docker.ErrNotFound},
			call:  func(e *fakeengine.Engine) error { _, err := e.InspectVolume(ctx, "v"); return err },
			want:  docker.ErrNotFound,
		},
		"no address pool": {
			fault: fakeengine.Fault{Op: fakeengine.OpEnsureNetwork, Err: docker.ErrNoAddressPool},
			call: func(e *fakeengine.Engine) error {
				_, err := e.EnsureNetwork(ctx, docker.NetworkSpec{Name: "n"})
				return err
			},
			want: docker.ErrNoAddressPool,
		},
		"a failed pull": {
			fault: fakeengine.Fault{Op: fakeengine.OpEnsureImage, Target: image, Err: pull},
			call:  func(e *fakeengine.Engine) error { return e.EnsureImage(ctx, image) },
			want:  pull,
		},
		"unavailable, on a container named by its ID": {
			fault: fakeengine.Fault{Op: fakeengine.OpExec, Target: "ctr-c", Err: docker.ErrUnavailable},
			call: func(e *fakeengine.Engine) error {
				c, err := e.RunContainer(ctx, spec("ctr-c"))
				if err != nil {
					return err
				}
				_, err = e.Exec(ctx, c.ID, docker.ExecSpec{Cmd: []string{"true"}})
				return err
			},
			want: docker.ErrUnavailable,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := fakeengine.New(image)
			tc.fault.Times = 1
			e.Fail(tc.fault)
			if err := tc.call(e); !errors.Is(err, tc.want) {
				t.Fatalf("with the fault: want %v, got %v", tc.want, err)
			}
			if err := tc.call(e); err != nil && !errors.Is(err, docker.ErrNotFound) {
				t.Fatalf("after the fault's one time: %v", err)
			}
		})
	}
}

func TestAFaultOnOneObjectLeavesTheOthers(t *testing.T) {
	ctx := context.Background()
	e := fakeengine.New(image)
	clear := e.Fail(fakeengine.Fault{Op: fakeengine.OpRunContainer, Target: "ctr-a", Err: docker.ErrConflict})
	if _, err := e.RunContainer(ctx, spec("ctr-b")); err != nil {
		t.Fatalf("another container: %v", err)
	}
	for range 2 {
		if _, err := e.RunContainer(ctx, spec("ctr-a")); !errors.Is(err, docker.ErrConflict) {
			t.Fatalf("want ErrConflict until cleared, got %v", err)
		}
	}
	clear()
	if _, err := e.RunContainer(ctx, spec("ctr-a")); err != nil {
		t.Fatalf("after clear: %v", err)
	}
}

func TestAddressPoolsAreUsedUpAndGivenBack(t *testing.T) {
	ctx := context.Background()
	e := fakeengine.New(image)
	e.SetAddressPools(1)
	first, err := e.EnsureNetwork(ctx, docker.NetworkSpec{Name: "first"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.EnsureNetwork(ctx, docker.NetworkSpec{Name: "first"}); err != nil {
		t.Fatalf("an existing network takes no pool: %v", err)
	}
	if _, err := e.EnsureNetwork(ctx, docker.NetworkSpec{Name: "second"}); !errors.Is(err, docker.ErrNoAddressPool) {
		t.Fatalf("want ErrNoAddressPool, got %v", err)
	}
	if err := e.RemoveNetwork(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.EnsureNetwork(ctx, docker.NetworkSpec{Name: "second"}); err != nil {
		t.Fatalf("after a removal: %v", err)
	}
}

func TestAnOutageBreaksTheStreamAndKeepsTheContainers(t *testing.T) {
	ctx := context.Background()
	e := fakeengine.New(image)
	c, err := e.RunContainer(ctx, spec("ctr-c"))
	if err != nil {
		t.Fatal(err)
	}
	events, errs := e.Events(ctx, nil, time.Time{})
	e.SetUnavailable(true)
	select {
	case err := <-errs:
		if !errors.Is(err, docker.ErrUnavailable) {
			t.Fatalf("the stream broke with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stream did not break")
	}
	for range events { //nolint:revive // drained until closed
	}
	if err := e.Ping(ctx); !errors.Is(err, docker.ErrUnavailable) {
		t.Fatalf("Ping while away: %v", err)
	}
	if _, errs := e.Events(ctx, nil, time.Time{}); !errors.Is(<-errs, docker.ErrUnavailable) {
		t.Fatal("a stream opened while away did not fail")
	}
	e.SetUnavailable(false)
	got, err := e.InspectContainer(ctx, c.ID)
	if err != nil || !got.Running || got.StartedAt != c.StartedAt {
		t.Fatalf("after the outage: %+v, %v", got, err)
	}
}

func TestExitReportsDieAndOOM(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e := fakeengine.New(image)
	c, err := e.RunContainer(ctx, spec("ctr-c"))
	if err != nil {
		t.Fatal(err)
	}
	events, _ := e.Events(ctx, map[string]string{"afe.test": "fake"}, time.Time{})
	if err := e.Exit("ctr-c", 137, true); err != nil {
		t.Fatal(err)
	}
	var got []string
	for range 2 {
		ev := <-events
		got = append(got, string(ev.Action)+" "+ev.Labels["exitCode"])
	}
	if d := cmp.Diff([]string{"oom ", "die 137"}, got); d != "" {
		t.Fatalf("events (-want +got):\n%s", d)
	}
	after, _ := e.InspectContainer(ctx, c.ID)
	if after.Running || after.ExitCode != 137 {
		t.Fatalf("after Exit: %+v", after)
	}
}

func spec(name string) docker.ContainerSpec {
	return docker.ContainerSpec{Name: name, Image: image, Network: "none", User: "1000:1000",
		Labels: map[string]string{"afe.test": "fake"}}
}
