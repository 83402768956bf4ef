package docker

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// On a local engine the usage comes from the host's cgroup files without a
// request, and agrees with what the engine's stats say: CPU, memory and the
// bytes of a container that pinged another one on a network of the test.
func TestLocalUsageAgreesWithTheEngineWithoutARequest(t *testing.T) {
	if engine.cgroups == nil {
		t.Skip("the engine is not local: usage comes from its stats")
	}
	ctx := context.Background()
	labels := testLabels(t)
	net := uniqueName()
	if _, err := engine.EnsureNetwork(ctx, NetworkSpec{Name: net, Labels: labels, Internal: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = engine.RemoveNetwork(context.Background(), net) })
	_, err := engine.RunContainer(ctx, ContainerSpec{Name: uniqueName(), Image: testImage, Labels: labels, Network: net,
		Aliases: []string{"target"}, Command: []string{"sleep", "600"}, Init: true})
	if err != nil {
		t.Fatal(err)
	}
	c, err := engine.RunContainer(ctx, ContainerSpec{Name: uniqueName(), Image: testImage, Labels: labels, Network: net,
		Command:     []string{"sh", "-c", "ping -c 20 -i 0.05 -s 1000 target >/dev/null; i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done; touch /done; exec sleep 600"},
		MemoryBytes: 64 << 20, Init: true})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		code, err := engine.Exec(ctx, c.ID, ExecSpec{Cmd: []string{"test", "-e", "/done"}})
		return err == nil && code == 0
	})

	stats := testutil.ToFloat64(Requests.WithLabelValues("container_stats"))
	local, ok := engine.cgroups.usage(c.ID)
	if !ok {
		t.Fatal("the cgroup files of a container of the local engine cannot be read")
	}
	got, err := engine.ContainerUsage(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if n := testutil.ToFloat64(Requests.WithLabelValues("container_stats")) - stats; n != 0 {
		t.Errorf("%v stats requests, want none on a local engine", n)
	}
	remote, err := engine.containerStats(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if local.NetworkTransmitBytes < 20_000 || local.NetworkReceiveBytes < 20_000 {
		t.Errorf("network %d/%d bytes, want at least 20 pings of 1000 bytes each way", local.NetworkReceiveBytes, local.NetworkTransmitBytes)
	}
	// The container is idle: the two views agree within a little CPU and
	// memory, and to the byte on the network.
	near := func(a, b, tolerance uint64) bool { return a-b <= tolerance || b-a <= tolerance }
	if !near(got.CPUNanoseconds, remote.CPUNanoseconds, 50_000_000) || !near(got.MemoryBytes, remote.MemoryBytes, 4<<20) {
		t.Errorf("local %+v and the engine's %+v differ", got, remote)
	}
	// The engine's view is read after the local one: a stray frame on the
	// network in between (an ARP or IPv6 neighbour message, some tens of
	// bytes) may add to it, never take from it.
	for _, p := range [][2]uint64{{got.NetworkReceiveBytes, remote.NetworkReceiveBytes}, {got.NetworkTransmitBytes, remote.NetworkTransmitBytes}} {
		if p[1] < p[0] || p[1]-p[0] > 1024 {
			t.Errorf("network bytes differ from the engine's: local %d/%d, engine %d/%d (rx/tx)",
				got.NetworkReceiveBytes, got.NetworkTransmitBytes, remote.NetworkReceiveBytes, remote.NetworkTransmitBytes)
		}
	}
}

// A container unknown to the host's cgroups (a remote engine's, or gone)
// is not read locally: the engine is asked.
func TestLocalUsageOfAnUnknownContainer(t *testing.T) {
	h := &hostCgroups{root: "/sys/fs/cgroup", proc: "/proc"}
	for _, id := range []string{"0000000000000000000000000000000000000000000000000000000000000000", "../../etc", ""} {
		if _, ok := h.usage(id); ok {
			t.Errorf("%q read locally", id)
		}
	}
}

func TestNetDev(t *testing.T) {
	tests := map[string]struct {
		in     string
		rx, tx uint64
		ok     bool
	}{
		"loopback only": {in: head + "    lo:     100       1    0    0    0     0          0         0      100       1    0    0    0     0       0          0\n", ok: true},
		"two interfaces, lo left out": {
			in: head + "    lo:     100       1    0    0    0     0          0         0      100       1    0    0    0     0       0          0\n" +
				"  eth0:    2000      10    0    0    0     0          0         0      300       3    0    0    0     0       0          0\n" +
				"  eth1:      20       1    0    0    0     0          0         0        4       1    0    0    0     0       0          0\n",
			rx: 2020, tx: 304, ok: true,
		},
		"garbled": {in: head + "  eth0 2000\n", ok: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			rx, tx, ok := netDev([]byte(tc.in))
			if diff := cmp.Diff([]any{tc.rx, tc.tx, tc.ok}, []any{rx, tx, ok}); diff != "" {
				t.Error(diff)
			}
		})
	}
}

const head = "Inter-|   Receive                                                |  Transmit\n" +
	" face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n"
