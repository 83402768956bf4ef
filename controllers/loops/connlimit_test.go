package loops

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/connlimit"
	"afe.dev/sandbox/test/dockertest"
)

// TestSweepKeepsTheConntrackBoundToTheInstance: the sweep makes the
// instance's table on the host hold its sandbox networks' subnets and its
// proxies' egress addresses, whatever was added or left before, and
// empties it once they are gone.
func TestSweepKeepsTheConntrackBoundToTheInstance(t *testing.T) {
	engine, skip, err := dockertest.Require()
	if err != nil {
		t.Fatal(err)
	}
	if skip != "" {
		t.Skip(skip)
	}
	ctx := context.Background()
	instance := fmt.Sprintf("test-sweep-%d", time.Now().UnixNano())
	network, egress, proxy := instanceObjects(t, engine, instance)

	h, err := connlimit.New(instance, connlimit.Limits{Rate: 10, Burst: 100, Max: 256}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = exec.Command("nft", "delete", "table", "ip", h.TableName()).Run() })
	if err := h.Install(ctx, network.Bridge); err != nil {
		t.Fatal(err)
	}
	if err := h.AddNetwork(ctx, []string{"198.18.250.0/29"}); err != nil { // left by a removed network
		t.Fatal(err)
	}
	s := &Sweeper{Engine: engine, Instance: instance, ConnLimits: h, EgressNetwork: egress.Name}
	check := func(when string, nets, proxies []string) {
		t.Helper()
		if err := s.syncConnLimits(ctx); err != nil {
			t.Fatal(err)
		}
		got := map[string][]string{}
		for _, set := range []string{connlimit.SetNetworks, connlimit.SetProxies} {
			elems, err := h.Elements(ctx, set)
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(elems)
			got[set] = elems
		}
		want := map[string][]string{connlimit.SetNetworks: nets, connlimit.SetProxies: proxies}
		if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b []string) bool { return len(a)+len(b) == 0 || slices.Equal(a, b) })); diff != "" {
			t.Errorf("%s: the table's sets (-want +got):\n%s", when, diff)
		}
	}
	check("with a network and a proxy", network.Subnets, []string{proxy.IPs[egress.Name]})
	if err := engine.RemoveContainer(ctx, proxy.ID); err != nil {
		t.Fatal(err)
	}
	if err := engine.RemoveNetwork(ctx, network.ID); err != nil {
		t.Fatal(err)
	}
	check("once they are gone", nil, nil)
}

// instanceObjects are a sandbox network of the instance, an egress
// network, and a container on it labelled as the instance's proxy; they
// go with the test.
func instanceObjects(t *testing.T, engine *docker.Client, instance string) (network, egress *docker.Network, proxy *docker.Container) {
	t.Helper()
	ctx := context.Background()
	t.Cleanup(func() { dockertest.RemoveAll("afe.test=" + instance) })
	labels := func(role string) map[string]string {
		return map[string]string{"afe.test": instance, afev1.LabelController: instance, afev1.LabelRole: role}
	}
	network, err := engine.EnsureNetwork(ctx, docker.NetworkSpec{Name: instance + "-net", Labels: labels(afev1.RoleNetwork), Internal: true, NoHostAddress: true})
	if err != nil {
		t.Fatal(err)
	}
	egress, err = engine.EnsureNetwork(ctx, docker.NetworkSpec{Name: instance + "-egress", Labels: map[string]string{"afe.test": instance}})
	if err != nil {
		t.Fatal(err)
	}
	proxy, err = engine.RunContainer(ctx, docker.ContainerSpec{Name: instance + "-proxy", Image: dockertest.TestImage, Labels: labels(afev1.RoleProxy),
		Network: egress.Name, User: "1000:1000", Command: []string{"sleep", "600"}, CapDrop: []string{"ALL"}})
	if err != nil {
		t.Fatal(err)
	}
	return network, egress, proxy
}
