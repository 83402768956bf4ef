package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"

	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/subnets"
)

// AddressPools is what CheckEgressSubnets asks of the engine.
type AddressPools interface {
	DefaultAddressPools(ctx context.Context) ([]netip.Prefix, error)
	ListNetworks(ctx context.Context, labels map[string]string) ([]docker.Network, error)
	IsLocal() bool
}

// CheckEgressSubnets fails, naming the overlap, when --egress-subnets
// overlaps the engine's default address pools (which it hands out to
// networks made without a subnet) or, for an engine on this host, one of
// the host's routes that is not one of the engine's own networks. An
// engine that cannot be asked is no error: it refuses an overlapping
// network itself, and the sandbox waits.
func CheckEgressSubnets(ctx context.Context, engine AddressPools, ranges []netip.Prefix) error {
	if len(ranges) == 0 {
		return nil
	}
	pools, err := engine.DefaultAddressPools(ctx)
	if err != nil {
		logf.FromContext(ctx).Info("Cannot check --egress-subnets against the engine's address pools", "error", err.Error())
		return nil
	}
	what := "the engine's default address pool"
	if len(pools) == 0 {
		pools, what = subnets.EngineDefaultPools, "the engine's built-in default address pool"
	}
	var others []subnets.Named
	for _, p := range pools {
		others = append(others, subnets.Named{Prefix: p, What: what})
	}
	if engine.IsLocal() {
		routes, err := hostRoutes(ctx, engine)
		if err != nil {
			return err
		}
		others = append(others, routes...)
	}
	return subnets.CheckClear(ranges, others)
}

// hostRoutes are the host's routes but those of the engine's networks
// (their bridges'), which are taken blocks rather than a collision.
func hostRoutes(ctx context.Context, engine AddressPools) ([]subnets.Named, error) {
	text, err := os.ReadFile(subnets.RoutesFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil // not Linux: nothing to compare with
	}
	if err != nil {
		return nil, fmt.Errorf("read the host's routes: %w", err)
	}
	routes, err := subnets.ParseRoutes(string(text))
	if err != nil {
		return nil, err
	}
	networks, err := engine.ListNetworks(ctx, nil)
	if err != nil {
		return routes, nil //nolint:nilerr // without the list every route counts
	}
	own := map[netip.Prefix]bool{}
	for _, n := range networks {
		for _, s := range n.Subnets {
			if p, err := netip.ParsePrefix(s); err == nil {
				own[p.Masked()] = true
			}
		}
	}
	out := routes[:0]
	for _, rt := range routes {
		if !own[rt.Prefix] {
			out = append(out, rt)
		}
	}
	return out, nil
}

// inspectOrCreateNetwork returns the sandbox's network of the spec's name,
// made when missing on a free block of --egress-subnets (egressnet.Subnets).
func (r *Reconciler) inspectOrCreateNetwork(ctx context.Context, spec docker.NetworkSpec) (*docker.Network, error) {
	subnets := r.Subnets
	if subnets == nil {
		subnets = &r.ownSubnets
	}
	return subnets.InspectOrCreate(ctx, r.Engine, r.Config.EgressSubnets, spec)
}
