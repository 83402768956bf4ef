package loops

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
// takes a network's gateway when the network is made, saying that it
// changed (which recreates the proxies), and drops it when it is removed
// without saying so (a proxy refusing an address that went is kept), from
// the engine's events well before the periodic read.
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
	h := &HostAddresses{Engine: engine, Events: engine, Inputs: hostaddrs.Inputs{LocalEngine: engine.IsLocal(), AllowPrivate: true}}
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
	// A network that goes leaves the list for the proxies made from now
	// on, and recreates none: those made before keep refusing it.
	t0 = time.Now()
	docker("network", "rm", name)
	for {
		list, err := h.Current(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(list, gw) {
			t.Logf("a removed network's gateway out of the list after %s", time.Since(t0))
			break
		}
		if time.Since(t0) > 20*time.Second {
			t.Fatalf("%s still in the list 20 s after its network went: %v", gw, list)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for {
		select {
		case list := <-changes:
			if !slices.Contains(list, gw) && !slices.ContainsFunc(list, func(a string) bool { return !slices.Contains(before, a) }) {
				t.Fatalf("a network that went was said to change the list (the proxies would be recreated): %v", list)
			}
		default:
			return
		}
	}
}
