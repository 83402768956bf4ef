package connlimit

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"afe.dev/sandbox/test/testenv"
)

// requireNft is the host's nft usable by this process: a failure under CI
// and make test (run as root on the engine's host), a skip otherwise.
func requireNft(t *testing.T) {
	t.Helper()
	if _, err := LocalNft(context.Background(), "", "list", "tables"); err != nil {
		if testenv.DockerRequired() {
			t.Fatalf("the host's nft is not usable (the tests run as root on the engine's host): %v", err)
		}
		t.Skipf("the host's nft is not usable: %v", err)
	}
}

// setOf is the elements of the set of h's table, as nft lists them.
func setOf(t *testing.T, h *Host, set string) []string {
	t.Helper()
	out, err := LocalNft(context.Background(), "", "-j", "list", "set", "ip", h.table, set)
	if err != nil {
		t.Fatal(err)
	}
	elems, err := parseElements(out)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(elems, func(a, b string) int {
		pa, _ := netip.ParsePrefix(withBits(a))
		pb, _ := netip.ParsePrefix(withBits(b))
		return pa.Addr().Compare(pb.Addr())
	})
	return elems
}

// withBits is an element as a prefix (an address is a /32).
func withBits(e string) string {
	if strings.Contains(e, "/") {
		return e
	}
	return e + "/32"
}

// TestSyncKeepsToItsInstance: Sync makes the instance's sets what it is
// given (what is left behind goes, what is missing is added), keeps what
// was added after its mark, and leaves another instance's table alone.
func TestSyncKeepsToItsInstance(t *testing.T) {
	requireNft(t)
	ctx := context.Background()
	l := Limits{Rate: 10, Burst: 100, Max: 256}
	mine, other := testHost(t, l), testHost(t, l)
	for _, h := range []*Host{mine, other} {
		if _, err := LocalNft(ctx, Ruleset(h.table, l), "-f", "-"); err != nil {
			t.Fatal(err)
		}
	}
	if err := other.AddNetwork(ctx, []string{"198.18.7.0/29"}); err != nil {
		t.Fatal(err)
	}
	if err := other.AddProxy(ctx, "198.18.9.2"); err != nil {
		t.Fatal(err)
	}
	if err := mine.AddNetwork(ctx, []string{"198.18.8.0/29", "198.18.8.8/29", "fd00::/64"}); err != nil {
		t.Fatal(err)
	}
	mark := mine.Mark()
	if err := mine.AddNetwork(ctx, []string{"198.18.8.16/29"}); err != nil { // made while the engine was listed
		t.Fatal(err)
	}
	if err := mine.Sync(ctx, mark, []string{"198.18.8.8/29", "198.18.8.24/29"}, []string{"198.18.9.3"}); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"mine nets":     {"198.18.8.8/29", "198.18.8.16/29", "198.18.8.24/29"},
		"mine proxies":  {"198.18.9.3"},
		"other nets":    {"198.18.7.0/29"},
		"other proxies": {"198.18.9.2"},
	}
	got := map[string][]string{
		"mine nets": setOf(t, mine, SetNetworks), "mine proxies": setOf(t, mine, SetProxies),
		"other nets": setOf(t, other, SetNetworks), "other proxies": setOf(t, other, SetProxies),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("sets after the Sync (-want +got):\n%s", diff)
	}
	// A subnet the Sync removed is added again by the next creation that
	// gets it: the Host forgot it.
	if err := mine.AddNetwork(ctx, []string{"198.18.8.0/29"}); err != nil {
		t.Fatal(err)
	}
	if got := setOf(t, mine, SetNetworks); len(got) != 4 {
		t.Errorf("nets after adding a removed subnet again: %v", got)
	}
}
