package sandbox

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/controllers/config"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/sandboxspec"
	"afe.dev/sandbox/internal/subnets"
	"afe.dev/sandbox/test/fakeengine"
	"afe.dev/sandbox/test/testenv"
)

// racingEngine is an engine where, once, another user creates a network on
// the first free block of the range right after the controller listed the
// networks: the controller's choice is then refused by the engine.
type racingEngine struct {
	*fakeengine.Engine
	ranges []netip.Prefix
	once   sync.Once
	stole  netip.Prefix
}

func (e *racingEngine) ListNetworks(ctx context.Context, labels map[string]string) ([]docker.Network, error) {
	list, err := e.Engine.ListNetworks(ctx, labels)
	e.once.Do(func() {
		var inUse []netip.Prefix
		for _, n := range list {
			for _, s := range n.Subnets {
				inUse = append(inUse, netip.MustParsePrefix(s))
			}
		}
		e.stole, _ = subnets.Free(e.ranges, inUse)
		_, _ = e.EnsureNetwork(ctx, docker.NetworkSpec{Name: "someone-else", Subnet: e.stole})
	})
	return list, err
}

func sandboxWithEgress(name string) *afev1.Sandbox {
	return &afev1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), Generation: 1},
		Spec: afev1.SandboxSpec{SandboxTemplateSpec: afev1.SandboxTemplateSpec{
			Image: "afe/busybox:dev", Egress: []afev1.EgressHost{"example.com"}}},
	}
}

// The allocation against a fake engine (the real engine's side is
// docker.TestNetworkWithAChosenSubnet and the envtest specs): blocks of the
// range, none twice across two instances on one engine and a race between
// them, exhaustion reported naming the flag, a removed network's block
// handed out again.
func TestEgressNetworksGetBlocksOfTheirOwn(t *testing.T) {
	ctx := context.Background()
	ranges, err := subnets.Parse("10.99.0.0/27") // 4 blocks
	if err != nil {
		t.Fatal(err)
	}
	engine := &racingEngine{Engine: fakeengine.New(), ranges: ranges}
	a := &Reconciler{Engine: engine, Config: config.Config{Options: config.Options{Instance: "a", EgressSubnets: ranges}}}
	b := &Reconciler{Engine: engine, Config: config.Config{Options: config.Options{Instance: "b", EgressSubnets: ranges}}}

	var got []netip.Prefix
	for i, r := range []*Reconciler{a, b, a} {
		sbx := sandboxWithEgress("s" + string(rune('0'+i)))
		s := &sandboxScope{sbx: sbx, id: sandboxspec.IdentityOf(sbx, r.Config.Instance)}
		n, err := r.ensureNetwork(ctx, s, sandboxspec.Network(s.id))
		if err != nil {
			t.Fatalf("network %d: %v", i, err)
		}
		if len(n.Subnets) != 1 {
			t.Fatalf("network %d subnets %v", i, n.Subnets)
		}
		got = append(got, netip.MustParsePrefix(n.Subnets[0]))
	}
	if !engine.stole.IsValid() {
		t.Fatal("the race did not happen")
	}
	for i, p := range got {
		if p.Bits() != subnets.BlockBits || !ranges[0].Contains(p.Addr()) {
			t.Fatalf("network %d: %s is not a /29 of %s", i, p, ranges[0])
		}
		if p.Overlaps(engine.stole) {
			t.Fatalf("network %d: %s is the block someone else took", i, p)
		}
		for _, q := range got[:i] {
			if p.Overlaps(q) {
				t.Fatalf("%s handed out twice: %v", p, got)
			}
		}
	}

	// The range is full: the sandbox says so, naming the flag.
	full := sandboxWithEgress("full")
	s := &sandboxScope{sbx: full, id: sandboxspec.IdentityOf(full, "b")}
	res, err := b.reconcileEgress(ctx, s)
	if err != nil || res.RequeueAfter == 0 {
		t.Fatalf("a full range: %v, %v", res, err)
	}
	c := meta.FindStatusCondition(full.Status.Conditions, afev1.EgressReadyCondition)
	if c == nil || c.Reason != afev1.AddressPoolExhaustedReason || !strings.Contains(c.Message, "--egress-subnets (10.99.0.0/27: 4 blocks)") {
		t.Fatalf("condition %+v", c)
	}
	if _, err := engine.InspectNetwork(ctx, sandboxspec.Network(s.id).Name); !errors.Is(err, docker.ErrNotFound) {
		t.Fatalf("a network was made on a full range: %v", err)
	}

	// A network removed gives its block back.
	if err := engine.RemoveNetwork(ctx, "someone-else"); err != nil {
		t.Fatal(err)
	}
	n, err := b.ensureNetwork(ctx, s, sandboxspec.Network(s.id))
	if err != nil || len(n.Subnets) != 1 || n.Subnets[0] != engine.stole.String() {
		t.Fatalf("after a removal: %+v, %v; want %s", n, err, engine.stole)
	}
}

// pools is an engine's side of CheckEgressSubnets.
type pools struct {
	pools    []netip.Prefix
	networks []docker.Network
	local    bool
}

func (p pools) DefaultAddressPools(context.Context) ([]netip.Prefix, error) { return p.pools, nil }
func (p pools) ListNetworks(context.Context, map[string]string) ([]docker.Network, error) {
	return p.networks, nil
}
func (p pools) IsLocal() bool { return p.local }

func TestCheckEgressSubnets(t *testing.T) {
	ctx := context.Background()
	check := func(engine pools, ranges string) error {
		t.Helper()
		r, err := subnets.Parse(ranges)
		if err != nil {
			t.Fatal(err)
		}
		return CheckEgressSubnets(ctx, engine, r)
	}
	if err := check(pools{}, "172.18.0.0/24"); err == nil || !strings.Contains(err.Error(), "built-in default address pool 172.18.0.0/16") {
		t.Fatalf("inside a built-in pool: %v", err)
	}
	configured := pools{pools: []netip.Prefix{netip.MustParsePrefix("10.200.0.0/16")}}
	if err := check(configured, "10.200.1.0/24"); err == nil || !strings.Contains(err.Error(), "the engine's default address pool 10.200.0.0/16") {
		t.Fatalf("inside a configured pool: %v", err)
	}
	if err := check(configured, "172.18.0.0/24"); err != nil {
		t.Fatalf("the built-in pools do not apply when the engine has its own: %v", err)
	}
	if err := check(pools{}, subnets.Default); err != nil {
		t.Fatalf("the default: %v", err)
	}

	// The host's routes, for an engine on this host: a route collides
	// unless it is one of the engine's networks (its bridge's).
	text, err := os.ReadFile(subnets.RoutesFile)
	if err != nil {
		// Under CI and make test nothing skips silently.
		if testenv.DockerRequired() {
			t.Fatalf("no %s here: %v", subnets.RoutesFile, err)
		}
		t.Skipf("no %s here: %v", subnets.RoutesFile, err)
	}
	routes, err := subnets.ParseRoutes(string(text))
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range routes {
		if rt.Prefix.Bits() > subnets.BlockBits || rt.Prefix.Bits() < 8 {
			continue
		}
		if err := check(pools{pools: configured.pools, local: true}, rt.Prefix.String()); err == nil || !strings.Contains(err.Error(), rt.What) {
			t.Fatalf("the host's route %s: %v", rt.Prefix, err)
		}
		if err := check(pools{pools: configured.pools}, rt.Prefix.String()); err != nil {
			t.Fatalf("routes of another host count for nothing: %v", err)
		}
		engine := pools{pools: configured.pools, local: true, networks: []docker.Network{{Name: "n", Subnets: []string{rt.Prefix.String()}}}}
		if err := check(engine, rt.Prefix.String()); err != nil {
			t.Fatalf("the route of an engine's network %s: %v", rt.Prefix, err)
		}
		return
	}
	if testenv.DockerRequired() {
		t.Fatal("the host has no route to compare with: the host-route check is untested here")
	}
	t.Skip("the host has no route to compare with")
}
