package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// memoryFloor is the host memory the egress-scale scenario leaves to
// everything else: it creates no more sandboxes below it (the machine may
// be shared), and says how many it made.
const memoryFloor = 3 << 30

// egressScale: N Sandboxes with egress created at once, each with its own
// network (a /29 of --egress-subnets) and proxy: the time until all are
// Ready, the pace of the first and the last ones, the host memory per
// sandbox with its proxy, the proxies' own resident memory, the manager's
// RSS and the engine's CPU while all of them idle; then all deleted, until
// no labelled object is left. The first row keeps each sandbox's time to
// Ready (the creation curve), the second the memory per sandbox.
// Long on purpose: a scenario reads top to bottom as the sequence it
// times, each step beside its CLI twin; split, the timing would be read
// across functions.
func (b *bench) egressScale(ctx context.Context) ([]row, error) {
	n := b.cfg.EgressScale
	b.logf("%d Sandboxes with egress at once", n)
	memBefore, err := memAvailable()
	if err != nil {
		return nil, err
	}
	names, start, seen, err := b.createAtOnce(ctx, "egress-scale", n, []afev1.EgressHost{"example.com"}, 30*time.Minute,
		func(made int) error {
			if avail, err := memAvailable(); err != nil || avail < memoryFloor {
				return fmt.Errorf("host memory below %d MiB after %d sandboxes with egress; stopped creating", memoryFloor>>20, made)
			}
			return nil
		})
	if err != nil {
		return nil, err
	}
	created := latest(seen).Sub(start)
	ready := make([]time.Time, 0, n)
	for _, t := range seen {
		ready = append(ready, t)
	}
	slices.SortFunc(ready, func(a, b time.Time) int { return a.Compare(b) })
	curve := &readyCurve{Unit: "s", Ready: make([]float64, len(ready))}
	for i, t := range ready {
		curve.Ready[i] = t.Sub(start).Seconds()
	}
	// The pace: wall time per Ready sandbox, over the first k (from the
	// first create call) and over the last k. Docker adds iptables rules
	// and a bridge per network: a slower engine shows in the second.
	k := min(50, max(1, n/2))
	first := ready[k-1].Sub(start) / time.Duration(k)
	last := ready[n-1].Sub(ready[n-1-k]) / time.Duration(k)
	if n == k {
		last = first
	}

	time.Sleep(5 * time.Second) // let the last reconciles end
	memAfter, err := memAvailable()
	if err != nil {
		return nil, err
	}
	perSandbox := float64(memBefore-memAfter) / float64(n) / (1 << 20)
	proxyRSS, err := b.proxyRSS(ctx)
	if err != nil {
		return nil, err
	}
	idle := min(b.cfg.IdleFor, 30*time.Second)
	engine0, err := engineCPU()
	if err != nil {
		return nil, err
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(idle):
	}
	engine1, err := engineCPU()
	if err != nil {
		return nil, err
	}
	engineUsed := cpuBetween(engine0, engine1)
	_, rss, err := b.procStats()
	if err != nil {
		return nil, err
	}

	b.logf("%d Sandboxes with egress deleted", n)
	start = time.Now()
	if err := inParallel(n, 8, func(i int) error {
		return b.c.Delete(ctx, b.sandboxObject(names[i], nil))
	}); err != nil {
		return nil, err
	}
	if err := b.waitNoObjects(ctx, 30*time.Minute); err != nil {
		return nil, err
	}
	deleted := time.Since(start)

	return []row{
		{
			Scenario: fmt.Sprintf("%d Sandboxes with egress created at once, until all Ready", n),
			Controller: fmt.Sprintf("%s; one Ready every %.2f s over the first %d, every %.2f s over the last %d",
				seconds(created), first.Seconds(), k, last.Seconds(), k),
			Baseline: "-", Ratio: "-", Ready: curve,
		},
		{
			Scenario: fmt.Sprintf("%d Sandboxes with egress Ready, idle for %s", n, idle),
			Controller: fmt.Sprintf("host memory %.1f MiB per sandbox with its proxy (squid %.1f MiB resident); manager RSS %d MiB; engine and proxies CPU %.0f%% of a core",
				perSandbox, proxyRSS, rss>>20, 100*engineUsed.Seconds()/idle.Seconds()),
			Baseline: "-", Ratio: "-",
			Memory: &memorySeries{Label: "with egress (its proxy included)", Unit: "MiB",
				Points: []memoryPoint{{Count: n, PerSandbox: perSandbox}}},
		},
		{
			Scenario:   fmt.Sprintf("%d Sandboxes with egress deleted, until no labelled object is left", n),
			Controller: seconds(deleted),
			Baseline:   "-", Ratio: "-",
		},
	}, nil
}

// proxyRSS is the mean resident memory of this run's proxies, in MiB: each
// proxy container's processes (its init and squid).
func (b *bench) proxyRSS(ctx context.Context) (float64, error) {
	proxies, err := b.engine.ListContainers(ctx, map[string]string{afev1.LabelController: b.instance, afev1.LabelRole: afev1.RoleProxy})
	if err != nil || len(proxies) == 0 {
		return 0, err
	}
	var total int64
	for _, p := range proxies {
		procs, err := b.engine.Processes(ctx, p.ID)
		if err != nil {
			return 0, err
		}
		for _, pr := range procs {
			rss, err := procKB(fmt.Sprintf("/proc/%d/status", pr.PID), "VmRSS:")
			if err != nil {
				return 0, fmt.Errorf("proxy %s: %w", p.Name, err)
			}
			total += rss
		}
	}
	return float64(total) / float64(len(proxies)) / (1 << 20), nil
}

// engineProcesses are the host processes that run containers: the engine,
// containerd, a shim and a storage process per container, and the proxies.
// (comm names, cut at 15 characters).
var engineProcesses = []string{"dockerd", "containerd", "containerd-shim", "fuse-overlayfs", "squid", "docker-init"}

// cpuSample is the CPU time of each of the engine's processes at one
// instant, by process (its PID and start time, so a reused PID is another
// process).
type cpuSample map[procKey]int64

type procKey struct{ pid, started int64 }

// engineCPU samples the CPU time the engine's processes have used so far
// (those of other users of the engine included).
func engineCPU() (cpuSample, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	sample := cpuSample{}
	for _, e := range entries {
		pid, err := strconv.ParseInt(e.Name(), 10, 64)
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		if p := parseStat(string(stat)); slices.Contains(engineProcesses, p.comm) {
			sample[procKey{pid, p.started}] = p.ticks
		}
	}
	return sample, nil
}

// cpuBetween is the CPU time the engine's processes used between two
// samples: each process's growth, all of it for one that started between
// them. A process that ended between them (a container of another user of
// the engine) is left out rather than subtracted: a sum of totals would go
// below zero when one ends.
func cpuBetween(before, after cpuSample) time.Duration {
	var ticks int64
	for k, t := range after {
		ticks += max(0, t-before[k])
	}
	return ticksToDuration(ticks)
}
