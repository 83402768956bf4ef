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
	started := time.Now()
	// The watch is on once the stream is open, which nothing here tells: a
	// network is made, and another one in its place when its change was
	// not seen within a few seconds, all well before the periodic read
	// (30 s after the start).
	base := fmt.Sprintf("afe-hostaddrs-test-%d", time.Now().UnixNano())
	label := "afe.test=" + base
	t.Cleanup(func() { dockertest.RemoveAll(label) })
	docker := func(args ...string) string {
		out, err := exec.Command("docker", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("docker %v: %v: %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	// seen waits until a change whose list ok accepts, or until.
	seen := func(until time.Time, ok func([]string) bool) bool {
		timer := time.NewTimer(time.Until(until))
		defer timer.Stop()
		for {
			select {
			case list := <-changes:
				if ok(list) {
					return true
				}
			case <-timer.C:
				return false
			}
		}
	}
	deadline := started.Add(20 * time.Second)
	var name, gw string
	var t0 time.Time
	for attempt := 1; ; attempt++ {
		if attempt > 1 {
			t.Logf("attempt %d: %s's gateway not seen within 4 s (the stream was not open yet?); another network", attempt, name)
			docker("network", "rm", name)
		}
		name = fmt.Sprintf("%s-%d", base, attempt)
		t0 = time.Now()
		docker("network", "create", "--label", label, name)
		gw = docker("network", "inspect", "-f", "{{range .IPAM.Config}}{{.Gateway}}{{end}}", name)
		if slices.Contains(before, gw) {
			t.Fatalf("%s was in the list before its network: %v", gw, before)
		}
		until := t0.Add(4 * time.Second)
		if until.After(deadline) || deadline.Sub(until) < 2*time.Second {
			until = deadline
		}
		if seen(until, func(l []string) bool { return slices.Contains(l, gw) }) {
			t.Logf("a new network's gateway in the list after %s", time.Since(t0))
			break
		}
		if !time.Now().Before(deadline) {
			t.Fatalf("a new network's gateway in the list: no change seen within 20 s of the start")
		}
	}
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
