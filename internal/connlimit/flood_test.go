package connlimit

import (
	"context"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"afe.dev/sandbox/test/dockertest"
)

// TestFloodStaysWithinTheBound: a client on an internal network like a
// sandbox's, opening connections to a server like its proxy as fast as it
// can, takes every one of them in the host's conntrack table without the
// bound, and no more than the burst and the rate allow with it, while a
// client of another such network still connects; an address bounded as a
// proxy's is held to the same. Under each runtime.
func TestFloodStaysWithinTheBound(t *testing.T) {
	engine := requireHost(t)
	const n = 50
	l := Limits{Rate: 1, Burst: 10, Max: 10}
	for _, rt := range dockertest.Runtimes() {
		t.Run(rt, func(t *testing.T) {
			ctx := context.Background()
			h := testHost(t, l)
			base := fmt.Sprintf("afe-test-ct-%d", time.Now().UnixNano())
			flooded := makePair(t, engine, rt, base+"-a", 1)
			neighbour := makePair(t, engine, rt, base+"-b", 1)
			if err := h.Install(ctx, flooded.network.Bridge); err != nil {
				t.Fatal(err)
			}

			// Without the bound: every connection takes an entry.
			if got := flood(t, flooded.clients[0], flooded.server, n); got < n*9/10 {
				t.Fatalf("unbounded flood: %d of %d connections answered", got, n)
			}
			if got := entriesFrom(t, flooded.addrs[0]); got < n*9/10 {
				t.Fatalf("unbounded flood: %d entries in the host's table from %s, want about %d", got, flooded.addrs[0], n)
			}

			// The neighbour's client stands for a proxy on the egress
			// network: bounded by its address alone.
			if err := h.AddNetwork(ctx, flooded.network.Subnets); err != nil {
				t.Fatal(err)
			}
			if err := h.AddProxy(ctx, neighbour.addrs[0]); err != nil {
				t.Fatal(err)
			}
			floodWithin(t, l, flooded.clients[0], flooded.server, flooded.addrs[0], n)
			if got := flood(t, neighbour.clients[0], neighbour.server, 5); got != 5 {
				t.Fatalf("the neighbour's connections after the flood: %d of 5 answered", got)
			}
			floodWithin(t, l, neighbour.clients[0], neighbour.server, neighbour.addrs[0], n)
		})
	}
}

// floodWithin floods the server from the client, whose address the bound
// holds, and checks that the host's table took no more than its burst and
// rate since the address was bounded (and that the flood did connect, up
// to them). Its entries from before stay (TIME_WAIT) and are not counted.
func floodWithin(t *testing.T, l Limits, client, server, addr string, n int) {
	t.Helper()
	before := entriesFrom(t, addr)
	start := time.Now()
	answered := flood(t, client, server, n)
	within := l.Burst + l.Rate*int(time.Since(start).Seconds()+1)
	got := entriesFrom(t, addr) - before
	t.Logf("bounded flood of %d connections from %s: %d answered, %d more entries in the host's table (bound here %d)", n, addr, answered, got, within)
	if got > within || answered > within {
		t.Fatalf("bounded flood: %d entries in the host's table and %d answers from %s, want at most %d (burst %d, rate %d/s)",
			got, answered, addr, within, l.Burst, l.Rate)
	}
	if got < l.Burst/2 {
		t.Fatalf("bounded flood: %d entries from %s, want the burst (%d) or about: did the flood connect?", got, addr, l.Burst)
	}
}

// TestHeldConnectionsStayWithinTheBound: connections a client holds open
// count against --sandbox-conn-max (ct count), however slowly it opened
// them: past the bound the next is refused, and once the client lets its
// connections go it connects again. Under runc only: the count is the
// host's table's, whatever runtime the client's sockets go through (the
// flood above runs under each). The bound is installed here as a manager
// given --sandbox-conn-image installs it, through a helper container of
// the engine (the flood's, with this process's nft).
func TestHeldConnectionsStayWithinTheBound(t *testing.T) {
	engine := requireHost(t)
	const held = 10
	l := Limits{Rate: 100, Burst: 100, Max: 4}
	ctx := context.Background()
	h := testHelperHost(t, engine, l)
	name := fmt.Sprintf("afe-test-ctheld-%d", time.Now().UnixNano())
	p := makePair(t, engine, "runc", name, 1)
	client, addr := p.clients[0], p.addrs[0]
	if err := h.Install(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if err := h.AddNetwork(ctx, p.network.Subnets); err != nil {
		t.Fatal(err)
	}

	// Each connection sends nothing: httpd waits for its request (a
	// minute) and the connection stays established.
	hold := fmt.Sprintf(`i=0; while [ $i -lt %d ]; do sleep 30 | nc %s 3128 >/dev/null 2>&1 & i=$((i+1)); sleep 0.1; done`, held, p.server)
	if out, err := exec.Command("docker", "exec", "-d", client, "sh", "-c", hold).CombinedOutput(); err != nil {
		t.Fatalf("hold connections: %v: %s", err, out)
	}
	var got int
	for until := time.Now().Add(20 * time.Second); time.Now().Before(until); time.Sleep(500 * time.Millisecond) {
		if got = entriesIn(t, addr, "ESTABLISHED"); got >= l.Max {
			break
		}
	}
	time.Sleep(2 * time.Second) // the last of the ten tried meanwhile
	got = entriesIn(t, addr, "ESTABLISHED")
	t.Logf("%d connections held open from %s: %d established in the host's table (bound %d)", held, addr, got, l.Max)
	if got != l.Max {
		t.Fatalf("%d connections held from %s, %d established: want exactly the bound, %d", held, addr, got, l.Max)
	}
	if n := flood(t, client, p.server, 1); n != 0 {
		t.Fatalf("a request past the bound was answered")
	}

	// The holders' sleeps, not the container's own (sleep 600).
	release := `for p in $(pidof sleep); do [ "$(tr '\0' ' ' < /proc/$p/cmdline)" = "sleep 30 " ] && kill $p; done; true`
	if out, err := exec.Command("docker", "exec", client, "sh", "-c", release).CombinedOutput(); err != nil {
		t.Fatalf("let the connections go: %v: %s", err, out)
	}
	deadline := time.Now().Add(20 * time.Second)
	for flood(t, client, p.server, 1) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("no request answered once the held connections were let go (%d established)", entriesIn(t, addr, "ESTABLISHED"))
		}
		time.Sleep(500 * time.Millisecond)
	}
}
