package fakeengine

import (
	"context"
	"fmt"
	"net/netip"
	"sort"

	"afe.dev/sandbox/docker"
)

type network struct {
	id, name   string
	labels     map[string]string
	internal   bool
	predefined bool
	// subnet is the network's (a /24 from the pools, 10.200.3.0/24, or the
	// caller's): the gateway is its first address, its containers get the
	// next ones. Invalid for host and none.
	subnet netip.Prefix
	// pooled is true when the subnet came from the address pools.
	pooled bool
	next   int
}

func (n *network) gateway() string { return n.subnet.Addr().Next().String() }

// address hands out the next container address on the network.
func (n *network) address() string {
	if !n.subnet.IsValid() {
		return ""
	}
	n.next++
	a := n.subnet.Addr().Next()
	for i := 0; i < n.next; i++ {
		a = a.Next()
	}
	return a.String()
}

func (n *network) report(gateways bool) *docker.Network {
	out := &docker.Network{ID: n.id, Name: n.name, Labels: copyLabels(n.labels), Internal: n.internal}
	if n.subnet.IsValid() {
		out.Subnets = []string{n.subnet.String()}
	}
	// The engine's own bridge reports its subnet only (Docker 20.10).
	if gateways && n.subnet.IsValid() && !n.predefined {
		out.Gateways = []string{n.gateway()}
	}
	return out
}

// network finds a network by exact name or ID. The caller holds e.mu.
func (e *Engine) network(name string) *network {
	if n, ok := e.networks[name]; ok {
		return n
	}
	for _, n := range e.networks {
		if n.name == name {
			return n
		}
	}
	return nil
}

// EnsureNetwork creates the network unless it exists, and returns it. A new
// network without a subnet of the caller's takes an address pool; with none
// left it fails with docker.ErrNoAddressPool. A subnet of the caller's that
// overlaps another network's fails with docker.ErrSubnetTaken.
func (e *Engine) EnsureNetwork(_ context.Context, spec docker.NetworkSpec) (*docker.Network, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.check(OpEnsureNetwork, spec.Name); err != nil {
		return nil, err
	}
	if n := e.network(spec.Name); n != nil {
		return n.report(true), nil
	}
	n := &network{id: e.newID(), name: spec.Name, labels: copyLabels(spec.Labels), internal: spec.Internal,
		subnet: spec.Subnet}
	if spec.Subnet.IsValid() {
		for _, o := range e.networks {
			if o.subnet.IsValid() && o.subnet.Overlaps(spec.Subnet) {
				return nil, fmt.Errorf("create network %s with subnet %s: %w: Pool overlaps with other one on this address space",
					spec.Name, spec.Subnet, docker.ErrSubnetTaken)
			}
		}
	} else {
		if e.pools <= 0 {
			return nil, fmt.Errorf("create network %s: %w: could not find an available, non-overlapping IPv4 address pool among the defaults to assign to the network",
				spec.Name, docker.ErrNoAddressPool)
		}
		e.pools--
		e.subnets++
		n.subnet = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(200 + e.subnets/256), byte(e.subnets % 256), 0}), 24)
		n.pooled = true
	}
	e.networks[n.id] = n
	return n.report(true), nil
}

// InspectNetwork returns docker.ErrNotFound when no network has the exact
// name or ID.
func (e *Engine) InspectNetwork(_ context.Context, name string) (*docker.Network, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.check(OpInspectNetwork, name); err != nil {
		return nil, err
	}
	n := e.network(name)
	if n == nil {
		return nil, fmt.Errorf("inspect network %s: %w: network %s not found", name, docker.ErrNotFound, name)
	}
	return n.report(true), nil
}

// ListNetworks returns the networks carrying all the labels (all with
// none), with their subnets but without their gateways (as the engine's
// list).
func (e *Engine) ListNetworks(_ context.Context, labels map[string]string) ([]docker.Network, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.check(OpListNetworks); err != nil {
		return nil, err
	}
	out := []docker.Network{}
	for _, n := range e.networks {
		if labelsMatch(n.labels, labels) {
			out = append(out, *n.report(false))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// RemoveNetwork removes the network; it succeeds when it is already gone.
// It fails while a running container is attached (a stopped one is not in
// the way, and cannot start again afterwards) and for the predefined ones.
func (e *Engine) RemoveNetwork(_ context.Context, name string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.check(OpRemoveNetwork, name); err != nil {
		return err
	}
	n := e.network(name)
	if n == nil {
		return nil
	}
	if n.predefined {
		return fmt.Errorf("remove network %s: %s is a pre-defined network and cannot be removed", name, n.name)
	}
	for _, c := range e.containers {
		if _, on := c.ips[n.id]; on && c.running() {
			return fmt.Errorf("remove network %s: error while removing network: network %s id %s has active endpoints", name, n.name, n.id)
		}
	}
	delete(e.networks, n.id)
	if n.pooled {
		e.pools++
	}
	return nil
}
