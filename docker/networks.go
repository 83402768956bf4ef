package docker

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/docker/docker/api/types/network"
)

// bridgeInhibitIPv4 keeps the host from taking an address on a bridge
// network, so containers on it have no route to services on the host.
const bridgeInhibitIPv4 = "com.docker.network.bridge.inhibit_ipv4"

// EnsureNetwork creates the network unless it exists, and returns it. The
// caller checks the labels of an existing network.
func (c *Client) EnsureNetwork(ctx context.Context, spec NetworkSpec) (*Network, error) {
	if n, err := c.InspectNetwork(ctx, spec.Name); err == nil {
		return n, nil
	}
	opts := network.CreateOptions{Driver: "bridge", Internal: spec.Internal, Labels: spec.Labels}
	if spec.NoHostAddress {
		opts.Options = map[string]string{bridgeInhibitIPv4: "true"}
	}
	if spec.Subnet.IsValid() {
		opts.IPAM = &network.IPAM{Driver: "default", Config: []network.IPAMConfig{{Subnet: spec.Subnet.String()}}}
	}
	c.count("network_create")
	if _, err := c.api.NetworkCreate(ctx, spec.Name, opts); err != nil {
		if isPoolExhausted(err) {
			return nil, fmt.Errorf("create network %s: %w: %w", spec.Name, ErrNoAddressPool, err)
		}
		if isPoolOverlap(err) {
			return nil, fmt.Errorf("create network %s with subnet %s: %w: %w", spec.Name, spec.Subnet, ErrSubnetTaken, err)
		}
		return nil, wrap(err, "create network "+spec.Name)
	}
	return c.InspectNetwork(ctx, spec.Name)
}

// ErrNoAddressPool is returned when the engine has no address range left for
// a new network: its default-address-pools are used up (about 30 networks
// with the engine's defaults).
var ErrNoAddressPool = errors.New("the engine has no free address pool for a new network")

// isPoolExhausted recognises the engine's message for ErrNoAddressPool, as
// Docker 20.10 and as Docker 23 and later word it.
func isPoolExhausted(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "could not find an available, non-overlapping IPv4 address pool") ||
		strings.Contains(msg, "all predefined address pools have been fully subnetted")
}

// ErrSubnetTaken is returned when the engine refuses a network's subnet
// because it overlaps the subnet of another of its networks.
var ErrSubnetTaken = errors.New("the subnet overlaps another network's on the engine")

// isPoolOverlap recognises the engine's refusal of a subnet that overlaps
// another network's (Docker 20.10 to 28 word it alike).
func isPoolOverlap(err error) bool {
	return strings.Contains(err.Error(), "Pool overlaps with other one on this address space")
}

// InspectNetwork returns ErrNotFound when the network does not exist.
func (c *Client) InspectNetwork(ctx context.Context, name string) (*Network, error) {
	c.count("network_inspect")
	n, err := c.api.NetworkInspect(ctx, name, network.InspectOptions{})
	if err != nil {
		return nil, wrap(err, "inspect network "+name)
	}
	// A network ID prefix can match a name; only an exact name counts.
	if n.Name != name && n.ID != name {
		return nil, wrap(errNotFoundf("network %s", name), "inspect network "+name)
	}
	out := fromInspect(n)
	return &out, nil
}

func fromInspect(n network.Inspect) Network {
	out := Network{ID: n.ID, Name: n.Name, Labels: n.Labels, Internal: n.Internal, Driver: n.Driver,
		NoHostAddress: n.Options[bridgeInhibitIPv4] == "true", Bridge: bridgeName(n)}
	for _, cfg := range n.IPAM.Config {
		if cfg.Subnet != "" {
			out.Subnets = append(out.Subnets, cfg.Subnet)
		}
		if cfg.Gateway != "" {
			out.Gateways = append(out.Gateways, cfg.Gateway)
		}
	}
	return out
}

// bridgeName is the host's device of a bridge network: the name its
// options give (docker0 for the default bridge), else the engine's own
// br-<first 12 characters of the ID>.
func bridgeName(n network.Inspect) string {
	switch {
	case n.Driver != "bridge":
		return ""
	case n.Options[bridgeNameOption] != "":
		return n.Options[bridgeNameOption]
	case len(n.ID) >= 12:
		return "br-" + n.ID[:12]
	}
	return ""
}

// bridgeNameOption names a bridge network's device on the host.
const bridgeNameOption = "com.docker.network.bridge.name"

// ListNetworks returns the networks carrying all the labels (every network
// with none).
func (c *Client) ListNetworks(ctx context.Context, labels map[string]string) ([]Network, error) {
	c.count("network_list")
	list, err := c.api.NetworkList(ctx, network.ListOptions{Filters: labelFilter(labels)})
	if err != nil {
		return nil, wrap(err, "list networks")
	}
	out := make([]Network, 0, len(list))
	for _, n := range list {
		out = append(out, fromInspect(n))
	}
	return out, nil
}

// RemoveNetwork removes the network; it succeeds when it is already gone.
func (c *Client) RemoveNetwork(ctx context.Context, name string) error {
	c.count("network_remove")
	if err := c.api.NetworkRemove(ctx, name); err != nil && !isNotFound(err) {
		return wrap(err, "remove network "+name)
	}
	return nil
}

// DefaultAddressPools are the engine's default-address-pools as its
// configuration sets them; none when it keeps its built-in ones.
func (c *Client) DefaultAddressPools(ctx context.Context) ([]netip.Prefix, error) {
	info, err := c.api.Info(ctx)
	if err != nil {
		return nil, wrap(err, "engine info")
	}
	var out []netip.Prefix
	for _, p := range info.DefaultAddressPools {
		pool, err := netip.ParsePrefix(p.Base)
		if err != nil {
			return nil, fmt.Errorf("the engine's address pool %q: %w", p.Base, err)
		}
		out = append(out, pool)
	}
	return out, nil
}
