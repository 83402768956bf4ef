// Package egressnet makes what a sandbox with egress (or a warm pool
// member) is given on the engine besides its container, for the Sandbox
// and SandboxPool reconcilers alike: its internal network's subnet from
// --egress-subnets (Subnets), the bounds of the host's conntrack table on
// that network and on its proxy (BoundNetwork, BoundProxy), the proxy's
// address there, and the wait for the proxy to answer (WaitProxy).
package egressnet

import (
	"context"
	"errors"
	"net/netip"
	"sync"

	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/subnets"
)

// subnetAttempts bounds the creations of one network whose block another
// user of the engine took between the list and the creation.
const subnetAttempts = 5

// NetworkEngine makes and lists the engine's networks.
type NetworkEngine interface {
	EnsureNetwork(ctx context.Context, spec docker.NetworkSpec) (*docker.Network, error)
	InspectNetwork(ctx context.Context, name string) (*docker.Network, error)
	ListNetworks(ctx context.Context, labels map[string]string) ([]docker.Network, error)
}

// Subnets hands the internal networks of sandboxes and of warm pool members
// their subnets from --egress-subnets; the Sandbox and SandboxPool
// reconcilers share one. The blocks in use are what the engine reports of
// all its networks, whoever made them, listed before each creation; Subnets
// itself only remembers the blocks this process is creating at that
// moment, so that two creations never pick the same one. The engine is the
// last word: a block another controller took in between is refused
// (docker.ErrSubnetTaken) and the next free one is tried.
type Subnets struct {
	mu       sync.Mutex
	creating map[netip.Prefix]bool
}

// reserve picks a free block of ranges and holds it until release.
func (p *Subnets) reserve(ctx context.Context, engine NetworkEngine, ranges []netip.Prefix) (netip.Prefix, func(), error) {
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

// Create creates an internal network on a free block of ranges
// (--egress-subnets), or on the engine's own pools when ranges is empty.
// It returns subnets.ErrExhausted when the ranges are full.
func (p *Subnets) Create(ctx context.Context, engine NetworkEngine, ranges []netip.Prefix, spec docker.NetworkSpec) (*docker.Network, error) {
	if len(ranges) == 0 {
		return engine.EnsureNetwork(ctx, spec)
	}
	var err error
	for range subnetAttempts {
		var release func()
		spec.Subnet, release, err = p.reserve(ctx, engine, ranges)
		if err != nil {
			return nil, err
		}
		var n *docker.Network
		n, err = engine.EnsureNetwork(ctx, spec)
		release()
		if !errors.Is(err, docker.ErrSubnetTaken) {
			return n, err
		}
		logf.FromContext(ctx).Info("Subnet taken in the meantime; trying the next free one", "network", spec.Name, "subnet", spec.Subnet)
	}
	return nil, err
}

// InspectOrCreate returns the network of the spec's name, made when
// missing. An existing one is returned whatever its subnet (one the engine
// chose before --egress-subnets keeps working); the caller checks its
// labels.
func (p *Subnets) InspectOrCreate(ctx context.Context, engine NetworkEngine, ranges []netip.Prefix, spec docker.NetworkSpec) (*docker.Network, error) {
	n, err := engine.InspectNetwork(ctx, spec.Name)
	if !errors.Is(err, docker.ErrNotFound) {
		return n, err
	}
	return p.Create(ctx, engine, ranges, spec)
}
