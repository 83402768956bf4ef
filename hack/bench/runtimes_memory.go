package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// The runtimes scenario's memory rows: the host memory of a sandbox or of
// its proxy under each runtime.

// idleMemory: RuntimeIdle Ready sandboxes (with the egress given) left
// idle under each runtime, named prefix-RUNTIME-i, and the host memory one
// container of each holds, the one container names (the sandbox's, or its
// proxy's): the working set of the container's cgroup (under runsc,
// gVisor's sentry, gofer and stubs are in it) and the PSS of the host
// processes in that cgroup.
func (b *bench) idleMemory(ctx context.Context, title, prefix string, egress []afev1.EgressHost, container func(*afev1.Sandbox) string) (row, error) {
	n := b.cfg.RuntimeIdle
	workingSet, pss := map[string]float64{}, map[string]float64{}
	for _, rt := range benchRuntimes {
		var sbxs []*afev1.Sandbox
		for i := range n {
			sbx := b.runtimeSandbox(fmt.Sprintf("%s-%s-%d", prefix, rt, i), rt, b.cfg.Image)
			sbx.Spec.Egress = egress
			sbx, _, err := b.createSandboxObject(ctx, sbx)
			if err != nil {
				return row{}, err
			}
			sbxs = append(sbxs, sbx)
		}
		time.Sleep(3 * time.Second) // let them settle
		for _, sbx := range sbxs {
			c, err := b.engine.InspectContainer(ctx, container(sbx))
			if err != nil {
				return row{}, err
			}
			u, err := b.engine.ContainerUsage(ctx, c.ID)
			if err != nil {
				return row{}, err
			}
			p, err := cgroupPSS(c.Pid)
			if err != nil {
				return row{}, err
			}
			workingSet[rt] += float64(u.MemoryBytes) / float64(n)
			pss[rt] += float64(p) / float64(n)
		}
		for _, sbx := range sbxs {
			if err := b.deleteSandbox(ctx, sbx); err != nil {
				return row{}, err
			}
		}
	}
	figure := func(rt string) string {
		return fmt.Sprintf("%s %.1f MiB working set, %.1f MiB PSS", rt, workingSet[rt]/(1<<20), pss[rt]/(1<<20))
	}
	r := row{
		Scenario:   "runsc against runc: " + title,
		Controller: figure("runsc"), Baseline: figure("runc"), Ratio: "-",
	}
	if pss["runc"] > 0 {
		r.Ratio = fmt.Sprintf("%.2fx", pss["runsc"]/pss["runc"])
	}
	return r, nil
}

// cgroupPSS is the proportional set size of the host processes in the
// memory cgroup of pid (cgroup v1 or v2), in bytes: shared pages (runsc's
// binary) are split between the sandboxes that map them.
func cgroupPSS(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return 0, err
	}
	var dir string
	for _, line := range strings.Split(string(data), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "memory" {
			dir = filepath.Join("/sys/fs/cgroup/memory", parts[2])
			break
		}
		if parts[0] == "0" && parts[1] == "" {
			dir = filepath.Join("/sys/fs/cgroup", parts[2])
		}
	}
	if dir == "" {
		return 0, fmt.Errorf("no memory cgroup for pid %d", pid)
	}
	procs, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return 0, err
	}
	var total int64
	for _, p := range strings.Fields(string(procs)) {
		kb, err := procKB("/proc/"+p+"/smaps_rollup", "Pss:")
		if err != nil {
			continue // gone since the listing
		}
		total += kb
	}
	return total, nil
}
