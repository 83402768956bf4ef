package connlimit

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/test/dockertest"
)

// requireHost is the engine, with the host's nft usable by this process
// (root in the engine host's network namespace).
func requireHost(t *testing.T) *docker.Client {
	t.Helper()
	engine, skip, err := dockertest.Require()
	if err != nil {
		t.Fatal(err)
	}
	if skip != "" {
		t.Skip(skip)
	}
	if err := dockertest.RequireRuntimes(engine); err != nil {
		t.Fatal(err)
	}
	if _, err := LocalNft(context.Background(), "", "list", "tables"); err != nil {
		t.Fatalf("the host's nft is not usable (the test runs as root on the engine's host): %v", err)
	}
	return engine
}

// testHost is a Host of an instance of the test's own, with this
// process's nft, whose table goes with the test.
func testHost(t *testing.T, l Limits) *Host {
	t.Helper()
	return testHostWith(t, l, fmt.Sprintf("test-%d", time.Now().UnixNano()), nil)
}

// testHelperHost is a Host of an instance of the test's own whose nft runs
// in a helper container of the engine, as a manager's with
// --sandbox-conn-image; the helper and the table go with the test.
func testHelperHost(t *testing.T, engine *docker.Client, l Limits) *Host {
	t.Helper()
	instance := fmt.Sprintf("test-%d", time.Now().UnixNano())
	name := "afe-" + instance + "-conntrack"
	helper := engine.HostHelper(name, dockertest.NftImage, map[string]string{"afe.test": name, "afe.role": "conntrack"})
	t.Cleanup(func() { _ = engine.RemoveContainer(context.Background(), name) })
	return testHostWith(t, l, instance, func(ctx context.Context, script string, args ...string) ([]byte, error) {
		return helper.Run(ctx, script, append([]string{"nft"}, args...)...)
	})
}

func testHostWith(t *testing.T, l Limits, instance string, nft Nft) *Host {
	t.Helper()
	h, err := New(instance, l, nft)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = LocalNft(context.Background(), "", "delete", "table", "ip", h.table) })
	return h
}

// pair is an internal network like a sandbox's (no host address) with a
// server standing for its proxy (an HTTP server on 3128) and clients
// standing for the sandbox, under the runtime; containers and network go
// with the test.
type pair struct {
	network *docker.Network
	server  string
	clients []string // names
	addrs   []string // the clients' addresses
}

func makePair(t *testing.T, engine *docker.Client, runtime, name string, clients int) pair {
	t.Helper()
	ctx := context.Background()
	labels := map[string]string{"afe.test": name}
	t.Cleanup(func() {
		cs, _ := engine.ListContainers(context.Background(), labels)
		for _, c := range cs {
			_ = engine.RemoveContainer(context.Background(), c.ID)
		}
		_ = engine.RemoveNetwork(context.Background(), name)
	})
	n, err := engine.EnsureNetwork(ctx, docker.NetworkSpec{Name: name, Labels: labels, Internal: true, NoHostAddress: true})
	if err != nil {
		t.Fatal(err)
	}
	run := func(cname, runtime string, cmd ...string) *docker.Container {
		c, err := engine.RunContainer(ctx, docker.ContainerSpec{Name: cname, Image: dockertest.TestImage, Labels: labels,
			Network: name, User: "1000:1000", Command: cmd, CapDrop: []string{"ALL"}, NoNewPrivileges: true, Runtime: runtime})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	p := pair{network: n}
	// The server runs under runc whatever the clients' runtime: busybox
	// httpd's short listen queue overflows under gVisor's ptrace platform,
	// which would drop connections the bound did not.
	p.server = run(name+"-srv", "runc", "httpd", "-f", "-p", "3128", "-h", "/tmp").IPs[name]
	for i := range clients {
		c := run(fmt.Sprintf("%s-c%d", name, i), runtime, "sleep", "600")
		p.clients, p.addrs = append(p.clients, c.Name), append(p.addrs, c.IPs[name])
	}
	return p
}

// flood opens n connections to the server at once from the client, each
// a request and its answer, and returns how many were answered. Each takes
// two processes (timeout, nc): gVisor's ptrace platform is slow to start
// them.
func flood(t *testing.T, client, server string, n int) int {
	t.Helper()
	script := fmt.Sprintf(`d=$(mktemp -d); i=0; while [ $i -lt %d ]; do printf 'GET / HTTP/1.0\r\n\r\n' | timeout 3 nc %s 3128 >$d/$i 2>&1 & i=$((i+1)); done; wait; cat $d/* | grep -c '^HTTP/'; rm -rf $d`, n, server)
	out, _ := exec.Command("docker", "exec", client, "sh", "-c", script).CombinedOutput()
	got, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("flood from %s: %s", client, out)
	}
	return got
}

// entriesFrom counts the host's conntrack entries whose connection the
// address opened.
func entriesFrom(t *testing.T, addr string) int { return entriesIn(t, addr, "") }

// entriesIn counts those of them in the TCP state ("" for any).
func entriesIn(t *testing.T, addr, state string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/net/nf_conntrack")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if i := strings.Index(line, " src="); i >= 0 && strings.HasPrefix(line[i+5:], addr+" ") &&
			(state == "" || strings.Contains(line, " "+state+" ")) {
			n++
		}
	}
	return n
}
