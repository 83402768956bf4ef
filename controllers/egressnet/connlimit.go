package egressnet

import (
	"context"
	"fmt"

	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/connlimit"
)

// BoundNetwork puts a sandbox's (or pool member's) internal network under
// the host's conntrack bound, as it is made: the connections its container
// opens are bounded from the first. A network bounded by this process
// costs a map lookup (the steady reconcile, never a claim).
func BoundNetwork(ctx context.Context, limits *connlimit.Host, n *docker.Network) error {
	if err := limits.AddNetwork(ctx, n.Subnets); err != nil {
		return fmt.Errorf("bound the conntrack entries of network %s: %w", n.Name, err)
	}
	return nil
}

// BoundProxy puts a proxy's address on the egress network under the
// host's conntrack bound: the upstream connections a sandbox drives
// through it.
func BoundProxy(ctx context.Context, limits *connlimit.Host, proxy *docker.Container, egressNetwork string) error {
	addr := proxy.IPs[egressNetwork]
	if limits == nil || addr == "" {
		return nil
	}
	if err := limits.AddProxy(ctx, addr); err != nil {
		return fmt.Errorf("bound the conntrack entries of proxy %s: %w", proxy.Name, err)
	}
	return nil
}
