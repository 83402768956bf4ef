package connlimit

import (
	"context"
	"fmt"
	"testing"
	"time"

	"afe.dev/sandbox/test/dockertest"
)

// TestFloodStaysWithinTheBound: a client on an internal network like a
// sandbox's, opening connections to a server like its proxy as fast as it
// can, takes every one of them in the host's conntrack table without the
// bound, and no more than the burst and the rate allow with it; a client
// of another such network still connects meanwhile. Under each runtime.
func TestFloodStaysWithinTheBound(t *testing.T) {
	engine := requireHost(t)
	const n = 100
	l := Limits{Rate: 1, Burst: 20, Max: 20}
	for _, rt := range dockertest.Runtimes() {
		t.Run(rt, func(t *testing.T) {
			ctx := context.Background()
			h := testHost(t, l)
			base := fmt.Sprintf("afe-test-ct-%d", time.Now().UnixNano())
			flooded := makePair(t, engine, rt, base+"-a", 2)
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

			for _, p := range []pair{flooded, neighbour} {
				if err := h.AddNetwork(ctx, p.network.Subnets); err != nil {
					t.Fatal(err)
				}
			}
			start := time.Now()
			answered := flood(t, flooded.clients[1], flooded.server, n)
			within := l.Burst + l.Rate*int(time.Since(start).Seconds()+1)
			got := entriesFrom(t, flooded.addrs[1])
			t.Logf("bounded flood of %d connections: %d answered, %d entries in the host's table (bound here %d)", n, answered, got, within)
			if got > within || answered > within {
				t.Fatalf("bounded flood: %d entries in the host's table and %d answers from %s, want at most %d (burst %d, rate %d/s)",
					got, answered, flooded.addrs[1], within, l.Burst, l.Rate)
			}
			if answered < l.Burst/2 {
				t.Fatalf("bounded flood: %d answers, want the burst (%d) or about", answered, l.Burst)
			}
			if got := flood(t, neighbour.clients[0], neighbour.server, 5); got != 5 {
				t.Fatalf("the neighbour's connections during the flood: %d of 5 answered", got)
			}
		})
	}
}
