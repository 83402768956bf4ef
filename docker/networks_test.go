package docker

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"
)

func TestIsPoolExhausted(t *testing.T) {
	tests := []struct {
		msg  string
		want bool
	}{
		// Docker 20.10.
		{"Error response from daemon: could not find an available, non-overlapping IPv4 address pool among the defaults to assign to the network", true},
		// Docker 23 and later.
		{"Error response from daemon: all predefined address pools have been fully subnetted", true},
		{"Error response from daemon: network with name afe-x-net already exists", false},
	}
	for _, tt := range tests {
		if got := isPoolExhausted(errors.New(tt.msg)); got != tt.want {
			t.Errorf("isPoolExhausted(%q) = %v, want %v", tt.msg, got, tt.want)
		}
	}
}

// TestNetworkWithAChosenSubnet: the engine takes a subnet of the caller's,
// reports it in the inspection and the list, gives containers addresses
// in it, and refuses a second network on the same or an overlapping
// subnet with ErrSubnetTaken, creating nothing.
func TestNetworkWithAChosenSubnet(t *testing.T) {
	ctx := context.Background()
	labels := testLabels(t)
	all, err := engine.ListNetworks(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var inUse []netip.Prefix
	for _, n := range all {
		for _, s := range n.Subnets {
			if p, err := netip.ParsePrefix(s); err == nil {
				inUse = append(inUse, p)
			}
		}
	}
	// A /28 of its own (two blocks) in a range the controllers' tests
	// leave alone, clear of the engine's networks.
	var block netip.Prefix
	for i := 0; i < 16 && !block.IsValid(); i++ {
		if p := netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 19, 254, byte(16 * i)}), 28); !overlapsAny(p, inUse) {
			block = p
		}
	}
	if !block.IsValid() {
		t.Fatal("no free /28 in 198.19.254.0/24 on the engine")
	}
	subnet := netip.PrefixFrom(block.Addr(), 29)

	name := uniqueName()
	t.Cleanup(func() {
		_ = engine.RemoveContainer(context.Background(), name+"-c")
		for _, n := range []string{name, name + "-same", name + "-around"} {
			_ = engine.RemoveNetwork(context.Background(), n)
		}
	})
	n, err := engine.EnsureNetwork(ctx, NetworkSpec{Name: name, Labels: labels, Internal: true, NoHostAddress: true, Subnet: subnet})
	if err != nil {
		t.Fatalf("create with subnet %s: %v", subnet, err)
	}
	if len(n.Subnets) != 1 || n.Subnets[0] != subnet.String() {
		t.Fatalf("subnets %v, want [%s]", n.Subnets, subnet)
	}
	// The host's device of the network, where the conntrack bound applies.
	if _, err := os.Stat("/sys/class/net/" + n.Bridge); n.Bridge == "" || err != nil {
		t.Fatalf("bridge %q of the network is not a device of the host: %v", n.Bridge, err)
	}
	for _, gw := range n.Gateways {
		if a, err := netip.ParseAddr(gw); err != nil || !subnet.Contains(a) {
			t.Fatalf("gateway %s outside %s", gw, subnet)
		}
	}
	list, err := engine.ListNetworks(ctx, labels)
	if err != nil || len(list) != 1 || len(list[0].Subnets) != 1 || list[0].Subnets[0] != subnet.String() {
		t.Fatalf("list: %+v, %v", list, err)
	}
	c, err := engine.RunContainer(ctx, ContainerSpec{Name: name + "-c", Image: testImage, Labels: labels, Network: name,
		User: "1000:1000", Command: []string{"sleep", "60"}, CapDrop: []string{"ALL"}})
	if err != nil {
		t.Fatal(err)
	}
	if a, err := netip.ParseAddr(c.IPs[name]); err != nil || !subnet.Contains(a) {
		t.Fatalf("container address %q outside %s", c.IPs[name], subnet)
	}

	for what, s := range map[string]netip.Prefix{"same": subnet, "around": block} {
		other := name + "-" + what
		_, err := engine.EnsureNetwork(ctx, NetworkSpec{Name: other, Labels: labels, Internal: true, Subnet: s})
		if !errors.Is(err, ErrSubnetTaken) {
			t.Fatalf("a second network on %s (%s): want ErrSubnetTaken, got %v", s, what, err)
		}
		if !strings.Contains(err.Error(), other) || !strings.Contains(err.Error(), s.String()) {
			t.Fatalf("the error names neither the network nor the subnet: %v", err)
		}
		if _, err := engine.InspectNetwork(ctx, other); !errors.Is(err, ErrNotFound) {
			t.Fatalf("the refused network %s exists: %v", other, err)
		}
	}
}

func overlapsAny(p netip.Prefix, in []netip.Prefix) bool {
	for _, q := range in {
		if q.Overlaps(p) {
			return true
		}
	}
	return false
}

// TestNetworksTellTheHostsAddresses: the list and the inspection report a
// bridge's gateway, and whether the host takes an address on it; the
// network events report a network's creation and removal, whoever made it.
func TestNetworksTellTheHostsAddresses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	labels := testLabels(t)
	// From now: the stream may open after the networks are made.
	events, errs := engine.networkEvents(ctx, time.Now())
	name := labels["afe.test"]
	withHost, err := engine.EnsureNetwork(ctx, NetworkSpec{Name: name + "-host", Labels: labels})
	if err != nil {
		t.Fatal(err)
	}
	without, err := engine.EnsureNetwork(ctx, NetworkSpec{Name: name + "-nohost", Labels: labels, Internal: true, NoHostAddress: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(withHost.Gateways) != 1 || withHost.NoHostAddress || !without.NoHostAddress {
		t.Fatalf("inspected: %+v, %+v", withHost, without)
	}
	list, err := engine.ListNetworks(ctx, labels)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Network{}
	for _, n := range list {
		got[n.Name] = n
	}
	if l := got[withHost.Name]; len(l.Gateways) != 1 || l.Gateways[0] != withHost.Gateways[0] || l.NoHostAddress {
		t.Fatalf("listed: %+v, inspected: %+v", l, withHost)
	}
	if !got[without.Name].NoHostAddress {
		t.Fatalf("listed: %+v", got[without.Name])
	}
	if err := engine.RemoveNetwork(ctx, withHost.ID); err != nil {
		t.Fatal(err)
	}
	want := []string{"create " + withHost.Name, "create " + without.Name, "destroy " + withHost.Name}
	var seen []string
	for len(seen) < len(want) {
		select {
		case ev := <-events:
			if strings.HasPrefix(ev.Name, name) {
				seen = append(seen, string(ev.Action)+" "+ev.Name)
			}
		case err := <-errs:
			t.Fatalf("events: %v (seen %v)", err, seen)
		}
	}
	if strings.Join(seen, ",") != strings.Join(want, ",") {
		t.Fatalf("events %v, want %v", seen, want)
	}
}
