package docker

import (
	"context"
	"testing"
	"time"
)

// A container that burns CPU, holds memory and writes to its writable layer
// and its volume shows all of it in its usage and in the engine's disk usage.
func TestUsageOfARunningContainer(t *testing.T) {
	ctx := context.Background()
	labels := testLabels(t)
	name := uniqueName()
	if _, err := engine.EnsureVolume(ctx, VolumeSpec{Name: name, Labels: labels}); err != nil {
		t.Fatal(err)
	}
	c, err := engine.RunContainer(ctx, ContainerSpec{
		Name: name, Image: testImage, Labels: labels, Network: "none", User: "0:0",
		Mounts: []Mount{{Type: MountVolume, Source: name, Target: "/workspace"}},
		Command: []string{"sh", "-c", `dd if=/dev/zero of=/layer bs=1M count=3 2>/dev/null
			dd if=/dev/zero of=/workspace/data bs=1M count=5 2>/dev/null
			i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done
			touch /done; exec sleep 600`},
		MemoryBytes: 64 << 20, Init: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		code, err := engine.Exec(ctx, c.ID, ExecSpec{Cmd: []string{"test", "-e", "/done"}})
		return err == nil && code == 0
	})

	u, err := engine.ContainerUsage(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if u.CPUNanoseconds < 10_000_000 {
		t.Errorf("CPU time %d ns, want at least 10 ms after a busy loop", u.CPUNanoseconds)
	}
	if u.MemoryBytes == 0 || u.MemoryBytes > 64<<20 {
		t.Errorf("memory %d bytes, want more than 0 and at most the 64 MiB limit", u.MemoryBytes)
	}
	if u.NetworkReceiveBytes != 0 || u.NetworkTransmitBytes != 0 {
		t.Errorf("network %d/%d bytes, want none without a network", u.NetworkReceiveBytes, u.NetworkTransmitBytes)
	}

	df, err := engine.DiskUsage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := df.Containers[c.ID]; got < 3<<20 {
		t.Errorf("writable layer %d bytes, want at least the 3 MiB written", got)
	}
	v, ok := df.Volumes[name]
	if !ok || v.Bytes < 5<<20 || !labelsMatch(v.Labels, labels) {
		t.Errorf("volume %+v (found %v), want at least the 5 MiB written, with its labels", v, ok)
	}
}

// The usage of a container that is gone is ErrNotFound.
func TestUsageOfAMissingContainer(t *testing.T) {
	if _, err := engine.ContainerUsage(context.Background(), "afe-test-no-such-container"); !isNotFound(err) {
		t.Fatalf("got %v, want not found", err)
	}
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 30 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
