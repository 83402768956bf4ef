package main

import (
	"context"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"

	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/connlimit"
)

// timeWaitFile is the host's TIME_WAIT timeout of conntrack, in seconds.
const timeWaitFile = "/proc/sys/net/netfilter/nf_conntrack_tcp_timeout_time_wait"

// setupConnLimits installs the conntrack bound of --sandbox-conn-rate,
// -burst and -max in the engine host's network namespace, which the
// manager must share (it checks that the egress network's bridge is
// there): a manager that cannot install it does not start, rather than run
// sandboxes that can fill the host's table; --sandbox-conn-rate=0 runs
// without it.
func setupConnLimits(ctx context.Context, log logr.Logger, engine *docker.Client, f *managerFlags) error {
	if !f.connLimits.Enabled() {
		log.Info("No conntrack bound: one sandbox can fill the engine host's connection-tracking table (--sandbox-conn-rate=0)")
		return nil
	}
	limits, err := connlimit.New(f.opts.Instance, f.connLimits)
	if err != nil {
		return setupFailed(err, "Invalid conntrack bound")
	}
	// The egress network's bridge shows that this is the engine host's
	// network namespace. An engine not answering yet, or an egress network
	// not made yet, is no reason not to start (the sandboxes say
	// EngineUnavailable or EgressNetworkMissing until they are there): the
	// table is installed then without that check.
	bridge := ""
	if egress, err := engine.InspectNetwork(ctx, f.opts.EgressNetwork); err != nil {
		log.Error(err, "Cannot read the egress network: the conntrack bound is installed without checking for its bridge", "network", f.opts.EgressNetwork)
	} else {
		bridge = egress.Bridge
	}
	if err := limits.Install(ctx, bridge); err != nil {
		return setupFailed(err, "Cannot install the conntrack bound in the engine host's network namespace: run the manager as root on the engine's host, or pass --sandbox-conn-rate=0 to run without it (docs/security.md)")
	}
	f.opts.ConnLimits = limits
	timeWait := hostTimeWait()
	log.Info("Conntrack bound", "table", "ip "+limits.TableName(), "rate", f.connLimits.Rate, "burst", f.connLimits.Burst,
		"max", f.connLimits.Max, "timeWait", timeWait, "entriesPerAddress", f.connLimits.Bound(timeWait))
	return nil
}

// hostTimeWait is the host's TIME_WAIT timeout of conntrack (Linux's 120 s
// when it cannot be read).
func hostTimeWait() time.Duration {
	b, err := os.ReadFile(timeWaitFile)
	if err != nil {
		return 120 * time.Second
	}
	s, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 120 * time.Second
	}
	return time.Duration(s) * time.Second
}
