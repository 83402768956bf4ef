package egressnet

import (
	"net/netip"

	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/sandboxspec"
)

// FixedProxyAddress is the fixed address of the proxy on a sandbox's (or
// pool member's) internal network: sandboxspec.ProxyAddress of its subnet
// when that is a block of --egress-subnets (ranges), which the controller
// configured on the network; "" for a network of the engine's own pools,
// where the engine takes no fixed address and chooses the proxy's.
func FixedProxyAddress(ranges []netip.Prefix, n *docker.Network) string {
	if n == nil || len(n.Subnets) == 0 {
		return ""
	}
	block, err := netip.ParsePrefix(n.Subnets[0])
	if err != nil {
		return ""
	}
	for _, r := range ranges {
		if r.Contains(block.Addr()) && r.Bits() <= block.Bits() {
			return sandboxspec.ProxyAddress(n.Subnets[0])
		}
	}
	return ""
}

// ProxyAddressOn is the address of the running proxy on the sandbox's
// network, as the engine reports it ("" when it is not on it).
func ProxyAddressOn(proxy *docker.Container, network string) string {
	if proxy == nil {
		return ""
	}
	return proxy.IPs[network]
}
