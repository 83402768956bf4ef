package docker

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// engineDir is a container's folder in the engine's data, where its log is
// kept.
func engineDir(t *testing.T, id string) string {
	t.Helper()
	return filepath.Join(sh(t, "info", "-f", "{{.DockerRootDir}}"), "containers", id)
}

// dirBytes is the disk the files under dir take.
func dirBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return err
	})
	if err != nil {
		t.Fatalf("walk %s (the test reads the engine's data as root): %v", dir, err)
	}
	return n
}

// A container's log is kept within its own bound whatever the engine's
// defaults (daemon.json) say: its log configuration is all explicit, and
// 40 MB written to its output leave at most the bound on the engine's disk.
func TestRunContainerKeepsItsLogWithinItsBound(t *testing.T) {
	ctx := context.Background()
	labels := testLabels(t)
	name := uniqueName()
	log := LogConfig{MaxFileBytes: 256 << 10, Files: 2}
	c, err := engine.RunContainer(ctx, ContainerSpec{
		Name: name, Image: testImage, Labels: labels, Network: "none", User: "1000:1000", Init: true,
		Command: []string{"sh", "-c", "sleep 600"},
		Log:     &log,
	})
	if err != nil {
		t.Fatal(err)
	}
	info, err := engine.api.ContainerInspect(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"max-size": "262144", "max-file": "2", "compress": "false"}
	if got := info.HostConfig.LogConfig; got.Type != "local" || !cmp.Equal(want, got.Config) {
		t.Fatalf("log config %s %v, want local %v", got.Type, got.Config, want)
	}
	// What the workload did: write to the output of PID 1 from a
	// command of its own, as the container's user.
	start := time.Now()
	sh(t, "exec", name, "sh", "-c", "yes 0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz | head -c 40000000 > /proc/1/fd/1")
	// The engine writes the log behind the output: let it catch up.
	dir := engineDir(t, c.ID)
	var last int64 = -1
	for n := dirBytes(t, dir); n != last; n = dirBytes(t, dir) {
		last = n
		time.Sleep(time.Second)
	}
	t.Logf("40 MB written in %s; the engine keeps %d bytes (bound %d)", time.Since(start).Round(time.Millisecond), last, log.Bound())
	// Besides the log, the folder holds the container's small files
	// (config, hostname, hosts, resolv.conf).
	if last > log.Bound()+64<<10 {
		t.Fatalf("the engine keeps %d bytes of the container, over the log's bound %d", last, log.Bound())
	}
}
