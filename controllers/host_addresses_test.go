package controllers

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"afe.dev/sandbox/internal/hostaddrs"
	"afe.dev/sandbox/test/dockertest"
)

// TestHostAddressesFollowTheEnginesNetworks: the list the proxies are given
// takes a network's gateway when the network is made and drops it when it
// is removed, each time saying that it changed (which recreates the
// proxies), from the engine's events well before the periodic read.
func TestHostAddressesFollowTheEnginesNetworks(t *testing.T) {
	engine, skip, err := dockertest.Require()
	if err != nil {
		t.Fatal(err)
	}
	if skip != "" {
		t.Skip(skip)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	changes := make(chan []string, 16)
	h := &HostAddresses{Engine: engine, Inputs: hostaddrs.Inputs{LocalEngine: engine.IsLocal(), AllowPrivate: true}}
	h.Changed = func(ctx context.Context) {
		list, _ := h.Current(ctx)
		changes <- list
	}
	before, err := h.Current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = h.Start(ctx) }()
	// The watch is on once the stream is open: a network made and removed
	// until a change is seen.
	name := fmt.Sprintf("afe-hostaddrs-test-%d", time.Now().UnixNano())
	label := "afe.test=" + name
	t.Cleanup(func() { dockertest.RemoveAll(label) })
	docker := func(args ...string) string {
		out, err := exec.Command("docker", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("docker %v: %v: %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	time.Sleep(500 * time.Millisecond)
	t0 := time.Now()
	docker("network", "create", "--label", label, name)
	gw := docker("network", "inspect", "-f", "{{range .IPAM.Config}}{{.Gateway}}{{end}}", name)
	if slices.Contains(before, gw) {
		t.Fatalf("%s was in the list before its network: %v", gw, before)
	}
	wait := func(what string, ok func([]string) bool) {
		t.Helper()
		deadline := time.After(20 * time.Second) // the periodic read is 30 s
		for {
			select {
			case list := <-changes:
				if ok(list) {
					t.Logf("%s after %s", what, time.Since(t0))
					return
				}
			case <-deadline:
				t.Fatalf("%s: no change seen within 20 s", what)
			}
		}
	}
	wait("a new network's gateway in the list", func(l []string) bool { return slices.Contains(l, gw) })
	t0 = time.Now()
	docker("network", "rm", name)
	wait("a removed network's gateway out of the list", func(l []string) bool { return !slices.Contains(l, gw) })
}
