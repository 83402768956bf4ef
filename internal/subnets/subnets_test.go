package subnets

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func prefixes(s ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(s))
	for i, p := range s {
		out[i] = netip.MustParsePrefix(p)
	}
	return out
}

func TestFree(t *testing.T) {
	tests := map[string]struct {
		ranges, inUse []string
		want          string // "" is ErrExhausted
	}{
		"nothing in use: the first block": {ranges: []string{"198.18.0.0/15"}, want: "198.18.0.0/29"},
		"the first block in use":          {ranges: []string{"198.18.0.0/15"}, inUse: []string{"198.18.0.0/29"}, want: "198.18.0.8/29"},
		"a hole between two blocks in use is filled": {ranges: []string{"198.18.0.0/15"},
			inUse: []string{"198.18.0.16/29", "198.18.0.0/29"}, want: "198.18.0.8/29"},
		"overlap: a larger network of someone else covers the start": {ranges: []string{"198.18.0.0/15"},
			inUse: []string{"198.18.0.0/24"}, want: "198.18.1.0/29"},
		"overlap: a small subnet inside a block spoils the whole block": {ranges: []string{"198.18.0.0/15"},
			inUse: []string{"198.18.0.4/30"}, want: "198.18.0.8/29"},
		"overlap: a small subnet at the start of a block spoils the whole block": {ranges: []string{"198.18.0.0/15"},
			inUse: []string{"198.18.0.0/30"}, want: "198.18.0.8/29"},
		"overlap: a single address in use":   {ranges: []string{"10.9.0.0/28"}, inUse: []string{"10.9.0.7/32"}, want: "10.9.0.8/29"},
		"in use around the range: exhausted": {ranges: []string{"198.18.0.0/15"}, inUse: []string{"198.0.0.0/8"}},
		"networks outside the ranges do not count": {ranges: []string{"10.9.0.0/28"},
			inUse: []string{"172.17.0.0/16", "10.8.255.248/29", "10.9.0.16/29"}, want: "10.9.0.0/29"},
		"exhaustion: both blocks of a /28 in use": {ranges: []string{"10.9.0.0/28"}, inUse: []string{"10.9.0.8/29", "10.9.0.0/29"}},
		"the next range once the first is full": {ranges: []string{"10.9.0.0/29", "10.10.0.0/29"},
			inUse: []string{"10.9.0.0/29"}, want: "10.10.0.0/29"},
		"ranges are taken in their order": {ranges: []string{"10.10.0.0/29", "10.9.0.0/29"}, want: "10.10.0.0/29"},
		"the top of the address space does not wrap": {ranges: []string{"255.255.255.240/28"},
			inUse: []string{"255.255.255.240/29", "255.255.255.248/29"}},
		"the last block of the address space": {ranges: []string{"255.255.255.240/28"},
			inUse: []string{"255.255.255.240/29"}, want: "255.255.255.248/29"},
		"IPv6 subnets in use are ignored": {ranges: []string{"10.9.0.0/29"}, inUse: []string{"fd00::/64"}, want: "10.9.0.0/29"},
		"no range":                        {},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Free(prefixes(tc.ranges...), prefixes(tc.inUse...))
			if tc.want == "" {
				if !errors.Is(err, ErrExhausted) {
					t.Fatalf("want ErrExhausted, got %v, %v", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got.String()); d != "" {
				t.Fatal(d)
			}
		})
	}
}

// TestFreeAcrossRestartsAndInstances hands out every block of a range the
// way the controller does: each allocation sees all the engine's networks
// (those of this instance, those another instance made in between, and
// what a restarted process finds), never a memory of its own.
func TestFreeAcrossRestartsAndInstances(t *testing.T) {
	ranges := prefixes("10.9.0.0/26") // 8 blocks
	var engine []netip.Prefix         // the subnets of the engine's networks
	seen := map[netip.Prefix]bool{}
	for i := 0; i < Size(ranges); i++ {
		// Instances A and B alternate; between any two, a "restart" keeps
		// nothing but the engine's networks.
		p, err := Free(ranges, engine)
		if err != nil {
			t.Fatalf("allocation %d: %v", i, err)
		}
		for _, q := range engine {
			if q.Overlaps(p) {
				t.Fatalf("allocation %d: %s overlaps %s, in use", i, p, q)
			}
		}
		if seen[p] {
			t.Fatalf("allocation %d: %s handed out twice", i, p)
		}
		seen[p] = true
		engine = append(engine, p)
	}
	if _, err := Free(ranges, engine); !errors.Is(err, ErrExhausted) {
		t.Fatalf("a full range: want ErrExhausted, got %v", err)
	}
	// A network removed releases its block, and only that one.
	released := engine[3]
	engine = append(engine[:3], engine[4:]...)
	if p, err := Free(ranges, engine); err != nil || p != released {
		t.Fatalf("after removing %s: got %v, %v", released, p, err)
	}
}

func TestParse(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    []string
		wantErr string
	}{
		"the default":          {in: Default, want: []string{"198.18.0.0/15"}},
		"a list, with spaces":  {in: "10.9.0.0/24, 10.10.0.0/29", want: []string{"10.9.0.0/24", "10.10.0.0/29"}},
		"empty: engine pools":  {in: ""},
		"not a CIDR":           {in: "10.9.0.0", wantErr: `"10.9.0.0" is not a CIDR`},
		"IPv6":                 {in: "fd00::/64", wantErr: "is not IPv4"},
		"smaller than a block": {in: "10.9.0.0/30", wantErr: "smaller than one /29 block"},
		"host bits set":        {in: "10.9.0.1/24", wantErr: "did you mean 10.9.0.0/24"},
		"overlapping ranges":   {in: "10.9.0.0/16,10.9.3.0/24", wantErr: "10.9.3.0/24 overlaps 10.9.0.0/16"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Parse(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), Flag) {
					t.Fatalf("want an error naming %s with %q, got %v", Flag, tc.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(tc.want) == 0 && len(got) == 0 {
				return
			}
			if d := cmp.Diff(tc.want, strings.Split(String(got), ",")); d != "" {
				t.Fatal(d)
			}
		})
	}
}

func TestCheckClear(t *testing.T) {
	pools := make([]Named, 0, len(EngineDefaultPools))
	for _, p := range EngineDefaultPools {
		pools = append(pools, Named{Prefix: p, What: "the engine's default address pool"})
	}
	tests := map[string]struct {
		ranges  string
		others  []Named
		wantErr []string
	}{
		"the default is clear of the engine's default pools": {ranges: Default, others: pools},
		"a range inside an engine pool": {ranges: "172.20.0.0/24", others: pools,
			wantErr: []string{"172.20.0.0/24 overlaps the engine's default address pool 172.20.0.0/16"}},
		"a range around a host route": {ranges: "10.0.0.0/8",
			others:  []Named{{Prefix: netip.MustParsePrefix("10.1.2.0/24"), What: "the host's route on eth1"}},
			wantErr: []string{"10.0.0.0/8 overlaps the host's route on eth1 10.1.2.0/24"}},
		"every overlap is named": {ranges: "192.168.0.0/24,172.31.0.0/29", others: pools,
			wantErr: []string{"192.168.0.0/24 overlaps", "172.31.0.0/29 overlaps"}},
		"a default route is no overlap": {ranges: Default,
			others: []Named{{Prefix: netip.MustParsePrefix("0.0.0.0/0"), What: "the host's route on eth0"}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ranges, err := Parse(tc.ranges)
			if err != nil {
				t.Fatal(err)
			}
			err = CheckClear(ranges, tc.others)
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatalf("want an error with %q", tc.wantErr)
			}
			for _, w := range append(tc.wantErr, Flag) {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("want %q in %q", w, err)
				}
			}
		})
	}
}

func TestParseRoutes(t *testing.T) {
	// This machine's table: a default route, the engine's bridge and the LAN.
	const table = `Iface	Destination	Gateway 	Flags	RefCnt	Use	Metric	Mask		MTU	Window	IRTT
eth0	00000000	010200C0	0003	0	0	0	00000000	0	0	0
docker0	000011AC	00000000	0001	0	0	0	0000FFFF	0	0	0
eth0	000200C0	00000000	0001	0	0	0	00FFFFFF	0	0	0
`
	got, err := ParseRoutes(table)
	if err != nil {
		t.Fatal(err)
	}
	want := []Named{
		{Prefix: netip.MustParsePrefix("172.17.0.0/16"), What: "the host's route on docker0"},
		{Prefix: netip.MustParsePrefix("192.0.2.0/24"), What: "the host's route on eth0"},
	}
	if d := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); d != "" {
		t.Fatal(d)
	}
	for name, bad := range map[string]string{
		"short line":   "Iface\tDestination\neth0\t00000000\n",
		"bad hex":      "h\neth0 XX0011AC 0 1 0 0 0 0000FFFF 0 0 0\n",
		"holey mask":   "h\neth0 000011AC 0 1 0 0 0 00FF00FF 0 0 0\n",
		"short digits": "h\neth0 0011AC 0 1 0 0 0 0000FFFF 0 0 0\n",
	} {
		if _, err := ParseRoutes(bad); err == nil {
			t.Errorf("%s: want an error", name)
		}
	}
}
