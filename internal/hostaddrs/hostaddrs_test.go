package hostaddrs

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"afe.dev/sandbox/internal/enginespec"
)

func addrs(s ...string) []netip.Addr {
	out := make([]netip.Addr, len(s))
	for i, a := range s {
		out[i] = netip.MustParseAddr(a)
	}
	return out
}

func TestDenyList(t *testing.T) {
	// The engine of this kind of machine: docker0, a user's bridge, an
	// internal network (the host holds its gateway too), a sandbox's network
	// without a host address, host and none without gateways.
	engine := []enginespec.Network{
		// docker0 reports its subnet only.
		{Name: "bridge", Driver: "bridge", Subnets: []string{"172.17.0.0/16"}},
		{Name: "afe-demo", Gateways: []string{"172.18.0.1"}},
		{Name: "internal", Internal: true, Gateways: []string{"10.10.0.1"}},
		{Name: "afe-ns.sbx_net", Internal: true, NoHostAddress: true, Gateways: []string{"10.128.0.1"}},
		{Name: "host"},
		{Name: "none"},
	}
	// This process's interfaces on the engine's host: loopback, eth0 with
	// a documentation address (public as far as the proxy knows), a ULA and
	// link-local IPv6, and the bridges' gateways.
	hostIfaces := addrs("127.0.0.1", "192.0.2.2", "172.17.0.1", "172.18.0.1", "10.10.0.1", "::1", "fd00::2", "fe80::fc:ff:fe00:1", "fe80::42:27ff:fea2:8649", "2001:db8::7")
	// A pod's interfaces: none of the engine's gateways among them.
	podIfaces := addrs("127.0.0.1", "10.244.1.7", "::1")

	tests := map[string]struct {
		in   Inputs
		want []string
	}{
		"allow-private: every gateway the host holds": {
			in:   Inputs{Networks: engine, AllowPrivate: true},
			want: []string{"10.10.0.1", "172.17.0.1", "172.18.0.1"},
		},
		"allow-private, local engine: and the host's own addresses, IPv6 too, link-local ones (one per container's veth) as their range": {
			in: Inputs{Networks: engine, Local: hostIfaces, LocalEngine: true, AllowPrivate: true},
			want: []string{"10.10.0.1", "127.0.0.1", "172.17.0.1", "172.18.0.1", "192.0.2.2",
				"::1", "2001:db8::7", "fd00::2", "fe80::/10"},
		},
		"allow-private, manager in a pod: the pod's addresses are not the host's": {
			in:   Inputs{Networks: engine, Local: podIfaces, LocalEngine: true, AllowPrivate: true},
			want: []string{"10.10.0.1", "172.17.0.1", "172.18.0.1"},
		},
		"allow-private, remote engine: the local interfaces are another machine's": {
			in:   Inputs{Networks: engine, Local: hostIfaces, AllowPrivate: true},
			want: []string{"10.10.0.1", "172.17.0.1", "172.18.0.1"},
		},
		"private refused: only what the private ranges do not hold": {
			in:   Inputs{Networks: engine, Local: hostIfaces, LocalEngine: true},
			want: []string{"192.0.2.2", "2001:db8::7"},
		},
		"private refused, a bridge on a public range": {
			in:   Inputs{Networks: append(engine, enginespec.Network{Name: "odd", Gateways: []string{"198.51.100.1"}})},
			want: []string{"198.51.100.1"},
		},
		"operator's addresses and ranges, sorted and once": {
			in: Inputs{Networks: engine, AllowPrivate: true,
				Extra: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("172.17.0.1/32"), netip.MustParsePrefix("203.0.113.9/24")}},
			want: []string{"10.10.0.1", "172.17.0.1", "172.18.0.1", "203.0.113.0/24"},
		},
		"an operator's range partly private stays": {
			in:   Inputs{Extra: []netip.Prefix{netip.MustParsePrefix("8.0.0.0/5")}},
			want: []string{"8.0.0.0/5"},
		},
		"gateways as some engines write them, and unparsable ones": {
			in:   Inputs{Networks: []enginespec.Network{{Gateways: []string{"172.20.0.1/16", "nonsense", "::ffff:172.21.0.1"}}}, AllowPrivate: true},
			want: []string{"172.20.0.1", "172.21.0.1"},
		},
		"docker0 alone, as a fresh engine has it: its first address, and the host's own": {
			in:   Inputs{Networks: []enginespec.Network{{Name: "bridge", Driver: "bridge", Subnets: []string{"172.17.0.0/16"}}}, Local: hostIfaces, LocalEngine: true, AllowPrivate: true},
			want: []string{"10.10.0.1", "127.0.0.1", "172.17.0.1", "172.18.0.1", "192.0.2.2", "::1", "2001:db8::7", "fd00::2", "fe80::/10"},
		},
		"a network of another driver without a gateway is not guessed": {
			in:   Inputs{Networks: []enginespec.Network{{Name: "lan", Driver: "macvlan", Subnets: []string{"192.168.1.0/24"}}}, AllowPrivate: true},
			want: []string{},
		},
		"nothing": {
			in:   Inputs{Networks: engine},
			want: []string{},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, DenyList(tc.in)); diff != "" {
				t.Fatalf("-want +got:\n%s", diff)
			}
		})
	}
}

// The list does not change when a private network comes or goes while the
// private ranges are refused: no proxy is recreated for it.
func TestDenyListIgnoresPrivateNetworksWhenPrivateIsRefused(t *testing.T) {
	before := DenyList(Inputs{Networks: []enginespec.Network{{Gateways: []string{"172.17.0.1"}}}})
	after := DenyList(Inputs{Networks: []enginespec.Network{{Gateways: []string{"172.17.0.1"}}, {Gateways: []string{"192.168.5.1"}}}})
	if diff := cmp.Diff(before, after); diff != "" {
		t.Fatal(diff)
	}
	open := DenyList(Inputs{Networks: []enginespec.Network{{Gateways: []string{"172.17.0.1"}}, {Gateways: []string{"192.168.5.1"}}}, AllowPrivate: true})
	if diff := cmp.Diff([]string{"172.17.0.1", "192.168.5.1"}, open); diff != "" {
		t.Fatal(diff)
	}
}

func TestParse(t *testing.T) {
	got, err := Parse(" 192.0.2.7, 198.51.100.0/24,2001:db8::1,,")
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("192.0.2.7/32"), netip.MustParsePrefix("198.51.100.0/24"), netip.MustParsePrefix("2001:db8::1/128")}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
		t.Fatal(diff)
	}
	for _, bad := range []string{"example.com", "1.2.3.4/40", "1.2.3", "1.2.3.4 all"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("%q was accepted", bad)
		}
	}
}
