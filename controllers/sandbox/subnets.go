package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync"

	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/subnets"
)

// subnetAttempts bounds the creations of one network whose block another
// user of the engine took between the list and the creation.
const subnetAttempts = 5

// subnetPool hands the sandboxes' internal networks their subnets from
// --egress-subnets. The blocks in use are what the engine reports of all
// its networks, whoever made them, listed before each creation; the pool
// itself only remembers the blocks this process is creating at that
// moment, so that two reconciles never pick the same one. The engine is
// the last word: a block another controller took in between is refused
// (docker.ErrSubnetTaken) and the next free one is tried.
type subnetPool struct {
	mu       sync.Mutex
	creating map[netip.Prefix]bool
}

// reserve picks a free block of ranges and holds it until release.
func (p *subnetPool) reserve(ctx context.Context, engine networkLister, ranges []netip.Prefix) (netip.Prefix, func(), error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	networks, err := engine.ListNetworks(ctx, nil)
	if err != nil {
		return netip.Prefix{}, nil, err
	}
	inUse := make([]netip.Prefix, 0, len(networks)+len(p.creating))
	for _, n := range networks {
		for _, s := range n.Subnets {
			if sub, err := netip.ParsePrefix(s); err == nil {
				inUse = append(inUse, sub)
			}
		}
	}
	for b := range p.creating {
		inUse = append(inUse, b)
	}
	block, err := subnets.Free(ranges, inUse)
	if err != nil {
		return netip.Prefix{}, nil, err
	}
	if p.creating == nil {
		p.creating = map[netip.Prefix]bool{}
	}
	p.creating[block] = true
	return block, func() {
		p.mu.Lock()
		delete(p.creating, block)
		p.mu.Unlock()
	}, nil
}

// createNetwork creates a sandbox's internal network on a free block of
// --egress-subnets, or on the engine's own pools when the flag is empty.
// It returns subnets.ErrExhausted when the range is full.
func (r *Reconciler) createNetwork(ctx context.Context, spec docker.NetworkSpec) (*docker.Network, error) {
	ranges := r.Config.EgressSubnets
	if len(ranges) == 0 {
		return r.Engine.EnsureNetwork(ctx, spec)
	}
	var err error
	for range subnetAttempts {
		var release func()
		spec.Subnet, release, err = r.subnets.reserve(ctx, r.Engine, ranges)
		if err != nil {
			return nil, err
		}
		var n *docker.Network
		n, err = r.Engine.EnsureNetwork(ctx, spec)
		release()
		if !errors.Is(err, docker.ErrSubnetTaken) {
			return n, err
		}
		logf.FromContext(ctx).Info("Subnet taken in the meantime; trying the next free one", "network", spec.Name, "subnet", spec.Subnet)
	}
	return nil, err
}

// inspectOrCreateNetwork returns the network of the spec's name, made when
// missing. An existing one is returned whatever its subnet (one the engine
// chose before --egress-subnets keeps working); the caller checks its labels.
func (r *Reconciler) inspectOrCreateNetwork(ctx context.Context, spec docker.NetworkSpec) (*docker.Network, error) {
	n, err := r.Engine.InspectNetwork(ctx, spec.Name)
	if !errors.Is(err, docker.ErrNotFound) {
		return n, err
	}
	return r.createNetwork(ctx, spec)
}

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
