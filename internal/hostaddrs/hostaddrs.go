// Package hostaddrs computes the addresses of the engine's host that every
// egress proxy refuses (internal/egress's Policy.DenyIPs), whatever the controller's
// flags: the host holds an address on each of the engine's bridges, and a
// container that reaches any of them reaches every service the host
// listens with on all its interfaces.
package hostaddrs

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	"afe.dev/sandbox/internal/enginespec"
)

// PrivateRanges are the ranges the proxy refuses unless
// --egress-allow-private is set: internal/egress renders them as its acl
// afe_private, and the deny list leaves them out.
var PrivateRanges = mustPrefixes(
	"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
	"192.0.0.0/24", "192.168.0.0/16", "198.18.0.0/15", "224.0.0.0/3",
	"::/127", "fc00::/7", "fe80::/10", "ff00::/8",
)

// linkLocal6 is IPv6's link-local range.
var linkLocal6 = netip.MustParsePrefix("fe80::/10")

// Inputs are what the engine and the host tell of the host's addresses.
type Inputs struct {
	// Networks are every network of the engine. The gateways of those
	// where the host takes an address are the host's.
	Networks []enginespec.Network
	// Local are the addresses of this process's interfaces; they are the
	// engine host's only when LocalEngine is set and they include one of
	// the networks' gateways (this process shares the host's network
	// namespace rather than a pod's or another machine's).
	Local       []netip.Addr
	LocalEngine bool
	// Extra are addresses or ranges the operator names (--egress-deny-ips).
	Extra []netip.Prefix
	// AllowPrivate is --egress-allow-private: without it the proxy refuses
	// the private ranges already, and the list leaves out what they hold,
	// so that a network coming or going on the engine (private, as the
	// engine makes them) changes no proxy.
	AllowPrivate bool
}

// DenyList returns the host's addresses the proxy must refuse, as
// the proxy's policy lists them: sorted, each once, a single address
// without its /32 or /128. Gateways that do not parse are skipped (the
// engine made them); the host's own addresses are added when they are the
// engine host's (Inputs.Local).
func DenyList(in Inputs) []string {
	gateways := gatewaysOf(in.Networks)
	all := slices.Clone(gateways)
	if in.LocalEngine && SharesHost(in.Local, gateways) {
		for _, a := range in.Local {
			if a.Is6() && a.IsLinkLocalUnicast() {
				// Each container's veth gives the host one more, and takes
				// it away: the whole range, so that the list stays put.
				all = append(all, linkLocal6)
				continue
			}
			all = append(all, single(a))
		}
	}
	all = append(all, in.Extra...)

	var out []netip.Prefix
	for _, p := range all {
		p = p.Masked()
		if !in.AllowPrivate && covered(p) {
			continue
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	out = slices.Compact(out)
	text := make([]string, len(out))
	for i, p := range out {
		if p.IsSingleIP() {
			text[i] = p.Addr().String()
		} else {
			text[i] = p.String()
		}
	}
	return text
}

// gatewaysOf returns the gateways of the networks on which the host takes
// an address. The engine's default bridge (docker0) reports its subnet and
// no gateway (Docker 20.10): a bridge without one counts the first address
// of each of its subnets, where the engine puts the host.
func gatewaysOf(networks []enginespec.Network) []netip.Prefix {
	var out []netip.Prefix
	for _, n := range networks {
		if n.NoHostAddress {
			continue
		}
		if len(n.Gateways) == 0 && n.Driver == "bridge" {
			for _, s := range n.Subnets {
				if p, err := netip.ParsePrefix(s); err == nil {
					out = append(out, single(p.Masked().Addr().Next()))
				}
			}
		}
		for _, g := range n.Gateways {
			// Some engines report a gateway with its prefix length.
			g, _, _ = strings.Cut(g, "/")
			if a, err := netip.ParseAddr(g); err == nil {
				out = append(out, single(a))
			}
		}
	}
	return out
}

// SharesHost tells whether addresses of this process's interfaces are the
// engine host's: one of them is a gateway of the engine's networks, which
// only the host holds.
func SharesHost(local []netip.Addr, gateways []netip.Prefix) bool {
	for _, a := range local {
		for _, g := range gateways {
			if g.Addr() == a.Unmap() {
				return true
			}
		}
	}
	return false
}

// single is the prefix of one address, an IPv4 one in its IPv4 form.
func single(a netip.Addr) netip.Prefix {
	a = a.Unmap().WithZone("")
	return netip.PrefixFrom(a, a.BitLen())
}

// covered tells whether the private ranges hold all of p.
func covered(p netip.Prefix) bool {
	for _, r := range PrivateRanges {
		if r.Bits() <= p.Bits() && r.Contains(p.Addr()) {
			return true
		}
	}
	return false
}

func mustPrefixes(s ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(s))
	for i, p := range s {
		out[i] = netip.MustParsePrefix(p)
	}
	return out
}

// Engine is what Read asks of the engine.
type Engine interface {
	ListNetworks(ctx context.Context, labels map[string]string) ([]enginespec.Network, error)
}

// Read asks the engine for its networks and this host for the addresses of
// its interfaces, and returns their DenyList; own is true when the host's
// own interface addresses are in it. in's Networks and Local are filled
// here.
func Read(ctx context.Context, engine Engine, in Inputs) (list []string, own bool, err error) {
	networks, err := engine.ListNetworks(ctx, nil)
	if err != nil {
		return nil, false, err
	}
	in.Networks = networks
	if in.LocalEngine {
		if in.Local, err = Interfaces(); err != nil {
			return nil, false, err
		}
	}
	return DenyList(in), in.LocalEngine && SharesHost(in.Local, gatewaysOf(in.Networks)), nil
}

// Interfaces returns the addresses of this process's network interfaces.
func Interfaces() ([]netip.Addr, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("list the host's interface addresses: %w", err)
	}
	var out []netip.Addr
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		if ip, ok := netip.AddrFromSlice(n.IP); ok {
			out = append(out, ip.Unmap())
		}
	}
	return out, nil
}

// Parse reads --egress-deny-ips: IPv4 or IPv6 addresses or CIDRs,
// comma-separated; empty is none.
func Parse(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if p, err := netip.ParsePrefix(item); err == nil {
			out = append(out, p)
			continue
		}
		a, err := netip.ParseAddr(item)
		if err != nil {
			return nil, fmt.Errorf("%q is not an IP address or CIDR", item)
		}
		out = append(out, single(a))
	}
	return out, nil
}
