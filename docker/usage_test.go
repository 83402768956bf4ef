package docker

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
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

	df, err := engine.DiskUsage(ctx, nil)
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

// On an engine whose storage driver cannot limit a writable layer (this
// machine's fuse-overlayfs), StorageQuota says so, and a container asking
// for a size is refused with ErrStorageQuotaUnsupported and leaves nothing.
func TestStorageQuotaTryAndFallBack(t *testing.T) {
	ctx := context.Background()
	ok, err := engine.StorageQuota(ctx)
	if err != nil {
		t.Fatal(err)
	}
	labels := testLabels(t)
	_, err = engine.RunContainer(ctx, ContainerSpec{Name: uniqueName(), Image: testImage, Labels: labels, Network: "none",
		Command: []string{"sleep", "600"}, StorageSizeBytes: 16 << 20})
	if ok {
		if err != nil {
			t.Fatalf("the engine reports overlay2 on xfs, and refused a size: %v (is xfs mounted with pquota?)", err)
		}
		return
	}
	if !errors.Is(err, ErrStorageQuotaUnsupported) {
		t.Fatalf("got %v, want ErrStorageQuotaUnsupported on a driver without quotas", err)
	}
	if cs, _ := engine.ListContainers(ctx, labels); len(cs) != 0 {
		t.Fatalf("left %d containers behind", len(cs))
	}
}

func TestStorageQuotaDriver(t *testing.T) {
	tests := map[string]struct {
		driver string
		status [][2]string
		want   bool
	}{
		"overlay2 on xfs":    {driver: "overlay2", status: [][2]string{{"Backing Filesystem", "xfs"}, {"Supports d_type", "true"}}, want: true},
		"overlay2 on ext4":   {driver: "overlay2", status: [][2]string{{"Backing Filesystem", "extfs"}}, want: false},
		"fuse-overlayfs":     {driver: "fuse-overlayfs", want: false},
		"overlay2, unknown":  {driver: "overlay2", want: false},
		"containerd, on xfs": {driver: "overlayfs", status: [][2]string{{"Backing Filesystem", "xfs"}}, want: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, storageQuotaDriver(tc.driver, tc.status)); diff != "" {
				t.Error(diff)
			}
		})
	}
}

// A container with a read-only root gets its volume owned by its user all
// the same (through a helper container, which is gone afterwards), and a
// bounded tmpfs at /tmp.
func TestReadOnlyRootWithOwnedVolume(t *testing.T) {
	ctx := context.Background()
	labels := testLabels(t)
	name := uniqueName()
	if _, err := engine.EnsureVolume(ctx, VolumeSpec{Name: name, Labels: labels}); err != nil {
		t.Fatal(err)
	}
	c, err := engine.RunContainer(ctx, ContainerSpec{
		Name: name, Image: testImage, Labels: labels, Network: "none", User: "1000:1000",
		Mounts:         []Mount{{Type: MountVolume, Source: name, Target: "/workspace", Owner: &Owner{UID: 1000, GID: 1000}}},
		Command:        []string{"sleep", "600"},
		ReadOnlyRootfs: true, Tmpfs: map[string]string{"/tmp": "rw,size=1048576"}, CapDrop: []string{"ALL"}, Init: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	for script, wantOK := range map[string]bool{
		"touch /workspace/ok":                       true,
		"touch /tmp/ok":                             true,
		"dd if=/dev/zero of=/tmp/big bs=1M count=2": false,
	} {
		code, err := engine.Exec(ctx, c.ID, ExecSpec{Cmd: []string{"sh", "-c", script}})
		if err != nil || (code == 0) != wantOK {
			t.Errorf("%s: exit %d, %v; want success %v", script, code, err, wantOK)
		}
	}
	var out strings.Builder
	// Even root, who owns /, cannot write to it.
	if code, err := engine.Exec(ctx, c.ID, ExecSpec{Cmd: []string{"touch", "/no"}, User: "0:0", Stderr: &out}); err != nil || code == 0 ||
		!strings.Contains(out.String(), "Read-only file system") {
		t.Errorf("root wrote to /: exit %d, %v, %q", code, err, out.String())
	}
	if cs, _ := engine.ListContainers(ctx, labels); len(cs) != 1 {
		t.Errorf("%d containers, want the one: the helper is gone", len(cs))
	}
}

// On this local engine the disk usage counts the inodes of a volume and of
// a writable layer, with their bytes, and keeps to the labels asked for.
func TestDiskUsageCountsInodes(t *testing.T) {
	ctx := context.Background()
	labels := testLabels(t)
	name := uniqueName()
	if _, err := engine.EnsureVolume(ctx, VolumeSpec{Name: name, Labels: labels}); err != nil {
		t.Fatal(err)
	}
	c, err := engine.RunContainer(ctx, ContainerSpec{
		Name: name, Image: testImage, Labels: labels, Network: "none", User: "0:0",
		Mounts: []Mount{{Type: MountVolume, Source: name, Target: "/workspace"}},
		Command: []string{"sh", "-c", `mkdir /workspace/d /layer && cd /workspace/d && seq 1000 | xargs touch && echo hi > 1 &&
			cd /layer && seq 300 | xargs touch && touch /done; exec sleep 600`},
		Init: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		code, err := engine.Exec(ctx, c.ID, ExecSpec{Cmd: []string{"test", "-e", "/done"}})
		return err == nil && code == 0
	})
	df, err := engine.DiskUsage(ctx, labels)
	if err != nil {
		t.Fatal(err)
	}
	if !df.InodesCounted {
		t.Fatal("the inodes were not counted on a local engine whose data this test sees")
	}
	// d and its 1,000 files.
	if v := df.Volumes[name]; v.Inodes != 1001 || v.Bytes != 3 {
		t.Errorf("volume %+v, want 1001 inodes and 3 bytes", v)
	}
	// /layer, its 300 files and /done, beside what the engine made.
	if l := df.Layers[c.ID]; l.Inodes < 302 || l.Inodes > 340 || l.Unmeasurable {
		t.Errorf("writable layer %+v, want 302 inodes and the few the engine makes", l)
	}
	if len(df.Volumes) != 1 || len(df.Layers) != 1 {
		t.Errorf("measured %d volumes and %d layers, want only the test's one of each", len(df.Volumes), len(df.Layers))
	}
}
