package main

import (
	"context"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"

	afev1 "afe.dev/sandbox/api/v1alpha1"
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
	nft, where := connlimit.Nft(nil), "with this process's nft"
	if f.connImage != "" {
		nft, where = helperNft(engine, f.opts.Instance, f.connImage), "through the helper container "+connHelperName(f.opts.Instance)
	}
	limits, err := connlimit.New(f.opts.Instance, f.connLimits, nft)
	if err != nil {
		return setupFailed(err, "Invalid conntrack bound")
	}
	bridge := ""
	if f.connImage == "" {
		// The egress network's bridge shows that this is the engine host's
		// network namespace. An engine not answering yet, or an egress
		// network not made yet, is no reason not to start (the sandboxes
		// say EngineUnavailable or EgressNetworkMissing until they are
		// there): the table is installed then without that check.
		if egress, err := engine.InspectNetwork(ctx, f.opts.EgressNetwork); err != nil {
			log.Error(err, "Cannot read the egress network: the conntrack bound is installed without checking for its bridge", "network", f.opts.EgressNetwork)
		} else {
			bridge = egress.Bridge
		}
	}
	if err := limits.Install(ctx, bridge); err != nil {
		return setupFailed(err, "Cannot install the conntrack bound in the engine host's network namespace "+where+
			": run the manager as root on the engine's host, or give it --sandbox-conn-image (an image with nft), or pass --sandbox-conn-rate=0 to run without it (docs/security.md)")
	}
	f.opts.ConnLimits = limits
	timeWait := hostTimeWait()
	log.Info("Conntrack bound", "table", "ip "+limits.TableName(), "installed", where, "rate", f.connLimits.Rate, "burst", f.connLimits.Burst,
		"max", f.connLimits.Max, "timeWait", timeWait, "entriesPerAddress", f.connLimits.Bound(timeWait))
	return nil
}

// connHelperName is the helper container of --sandbox-conn-image.
func connHelperName(instance string) string { return "afe-" + instance + "-conntrack" }

// helperNft runs nft in the instance's helper container of the image, on
// the engine host's network with NET_ADMIN alone; the container is found
// by its name and used only with this instance's labels.
func helperNft(engine *docker.Client, instance, image string) connlimit.Nft {
	helper := engine.HostHelper(connHelperName(instance), image, map[string]string{
		afev1.LabelController: instance,
		afev1.LabelRole:       afev1.RoleConnLimit,
	})
	return func(ctx context.Context, script string, args ...string) ([]byte, error) {
		return helper.Run(ctx, script, append([]string{"nft"}, args...)...)
	}
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
