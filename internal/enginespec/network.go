package enginespec

import "net/netip"

// NetworkSpec is a bridge network.
type NetworkSpec struct {
	Name   string
	Labels map[string]string
	// Internal networks have no route out.
	Internal bool
	// NoHostAddress gives the host no address on the network, so that its
	// containers cannot reach services listening on the host's interfaces.
	NoHostAddress bool
	// Subnet is the network's IPv4 subnet, chosen by the caller; the zero
	// value lets the engine take one from its default address pools. The
	// engine refuses one that overlaps another network's (docker's
	// ErrSubnetTaken).
	Subnet netip.Prefix
}

// Network is what the engine reports of a network.
type Network struct {
	ID       string
	Name     string
	Labels   map[string]string
	Internal bool
	// Gateways are the network's gateway addresses: the host's, on a
	// bridge that gives the host an address.
	Gateways []string
	// Subnets are the network's subnets (CIDRs).
	Subnets []string
	// NoHostAddress is true for a bridge on which the host takes no
	// address (NetworkSpec.NoHostAddress): its gateway is nobody's.
	NoHostAddress bool
	// Driver is the network's driver (bridge, host, null, macvlan...).
	Driver string
	// Bridge is the host's bridge device of a bridge network (docker0,
	// br-<id>); empty for other drivers.
	Bridge string
}
