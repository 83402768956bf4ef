package docker

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestStopStartKeepsTheContainerAndCountsRunningExecs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	labels := testLabels(t)
	name := uniqueName()
	// From now: the stream may open after the container is made.
	events, errs := engine.Events(ctx, labels, time.Now())
	// Init forwards the SIGTERM, as in a sandbox container.
	c, err := engine.RunContainer(ctx, ContainerSpec{
		Name: name, Image: testImage, Labels: labels, Network: "none", Init: true, Command: []string{"sleep", "600"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := engine.RunningExecs(ctx, name); err != nil || n != 0 {
		t.Fatalf("RunningExecs = %d, %v; want 0", n, err)
	}

	// A command in flight is counted, from the engine's record; its start
	// and end are events of the container, with its labels.
	execCtx, stopExec := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = engine.Exec(execCtx, name, ExecSpec{Cmd: []string{"sleep", "2"}})
	}()
	deadline := time.Now().Add(10 * time.Second)
	for n := 0; n != 1; {
		if n, err = engine.RunningExecs(ctx, name); err != nil {
			t.Fatal(err)
		}
		if n != 1 && time.Now().After(deadline) {
			t.Fatalf("RunningExecs = %d while an exec runs", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	<-done
	stopExec()
	if n, err := engine.RunningExecs(ctx, name); err != nil || n != 0 {
		t.Fatalf("RunningExecs = %d, %v after the exec ended; want 0", n, err)
	}
	seen := map[EventAction]bool{}
	for !seen[ActionExecDie] {
		select {
		case ev := <-events:
			if ev.Name == name && ev.Labels["afe.test"] == labels["afe.test"] {
				seen[ev.Action] = true
				if ev.Action == ActionExecStart && ev.Detail != "sleep 2" {
					t.Errorf("exec_start states the command line %q, want %q", ev.Detail, "sleep 2")
				}
			}
		case err := <-errs:
			t.Fatalf("event stream: %v", err)
		case <-ctx.Done():
			t.Fatalf("saw only %v", seen)
		}
	}
	if !seen[ActionExecStart] {
		t.Fatalf("saw %v", seen)
	}

	// Stopped, it stays, with its writable layer; stopping again is fine.
	if _, err := engine.Exec(ctx, name, ExecSpec{Cmd: []string{"sh", "-c", "echo kept > /tmp/mark"}}); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	if err := engine.StopContainer(ctx, name); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(stopped); d > StopGrace+2*time.Second {
		t.Fatalf("stop took %s", d)
	}
	if err := engine.StopContainer(ctx, name); err != nil {
		t.Fatalf("stop of a stopped container: %v", err)
	}
	got, err := engine.InspectContainer(ctx, name)
	if err != nil || got.Running || got.ID != c.ID {
		t.Fatalf("after stop: %+v, %v", got, err)
	}
	if n, err := engine.RunningExecs(ctx, name); err != nil || n != 0 {
		t.Fatalf("RunningExecs of a stopped container = %d, %v", n, err)
	}

	// Started again: the same container and its files.
	if err := engine.StartContainer(ctx, name); err != nil {
		t.Fatal(err)
	}
	if err := engine.StartContainer(ctx, name); err != nil {
		t.Fatalf("start of a running container: %v", err)
	}
	var out strings.Builder
	if _, err := engine.Exec(ctx, name, ExecSpec{Cmd: []string{"cat", "/tmp/mark"}, Stdout: &out}); err != nil || out.String() != "kept\n" {
		t.Fatalf("after start: %q, %v", out.String(), err)
	}
	for _, err := range []error{
		engine.StopContainer(ctx, "afe-no-such-container"),
		engine.StartContainer(ctx, "afe-no-such-container"),
	} {
		if !errors.Is(err, ErrNotFound) {
			t.Fatalf("want ErrNotFound, got %v", err)
		}
	}
}
