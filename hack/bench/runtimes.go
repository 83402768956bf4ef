package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// The runtimes scenario: gVisor's runsc against runc in the same run, the
// same work alternately under each. In its rows the Controller column is
// runsc, the Baseline column runc, and the ratio runsc over runc.

// benchRuntimes are the runtimes compared; the manager allows both
// (--runtimes), and `make bench` registers runsc first (make runsc).
var benchRuntimes = [2]string{"runc", "runsc"}

// gitImage is the image of the git commit row.
const gitImage = "afe/git:dev"

// runtimeRow is a timing row of runsc against runc.
func runtimeRow(title string, per map[string]sample) row {
	r := timing("runsc against runc: "+title, per["runsc"], per["runc"], "runc")
	r.Samples.ControllerName = "runsc"
	return r
}

// runtimes: runsc against runc in one run (creation, Runs, exec, CPU-bound
// and file-heavy work, idle memory).
// Long on purpose: a scenario reads top to bottom as the sequence it
// times, each step beside its CLI twin; split, the timing would be read
// across functions.
func (b *bench) runtimes(ctx context.Context) ([]row, error) {
	reps := b.cfg.RuntimeReps
	b.logf("runsc against runc (%d reps, %d files, %d idle sandboxes each)", reps, b.cfg.RuntimeFiles, b.cfg.RuntimeIdle)
	var rows []row

	created := map[string]sample{}
	for i := range reps {
		for _, rt := range benchRuntimes {
			sbx, d, err := b.createSandboxObject(ctx, b.runtimeSandbox(fmt.Sprintf("create-%s-%d", rt, i), rt, b.cfg.Image))
			if err != nil {
				return rows, err
			}
			created[rt] = append(created[rt], d)
			if err := b.deleteSandbox(ctx, sbx); err != nil {
				return rows, err
			}
		}
	}
	rows = append(rows, runtimeRow(fmt.Sprintf("one Sandbox, creation to Ready (%d reps)", reps), created))

	boxes := map[string]*afev1.Sandbox{}
	for _, rt := range benchRuntimes {
		sbx, _, err := b.createSandboxObject(ctx, b.runtimeSandbox("box-"+rt, rt, b.cfg.Image))
		if err != nil {
			return rows, err
		}
		boxes[rt] = sbx
	}

	trueRuns := map[string]sample{}
	for i := range reps {
		for _, rt := range benchRuntimes {
			d, _, err := b.runToEnd(ctx, boxes[rt], fmt.Sprintf("true-%s-%d", rt, i), []string{"true"}, "")
			if err != nil {
				return rows, err
			}
			trueRuns[rt] = append(trueRuns[rt], d)
		}
	}
	rows = append(rows, runtimeRow(fmt.Sprintf("a Run of `true`, creation to Completed (%d reps)", reps), trueRuns))

	execs := map[string]sample{}
	for _, rt := range benchRuntimes {
		// Once unmeasured: discovery and the first TLS sessions.
		if err := waitFor(ctx, time.Minute, func() error { return b.pluginExec(ctx, boxes[rt].Name) }); err != nil {
			return rows, err
		}
	}
	for range reps {
		for _, rt := range benchRuntimes {
			d, err := timed(func() error { return b.pluginExec(ctx, boxes[rt].Name) })
			if err != nil {
				return rows, err
			}
			execs[rt] = append(execs[rt], d)
		}
	}
	rows = append(rows, runtimeRow(fmt.Sprintf("`kubectl afe exec SANDBOX -- true`, as a whole process (%d reps)", reps), execs))

	// CPU-bound: shell arithmetic, no system call in the loop. The Run's
	// own duration (status.durationMilliseconds), without the Run's start.
	const loops = 400000
	cpu := map[string]sample{}
	for i := range reps {
		for _, rt := range benchRuntimes {
			script := fmt.Sprintf("i=0; while [ $i -lt %d ]; do i=$((i+1)); done", loops)
			_, run, err := b.runToEnd(ctx, boxes[rt], fmt.Sprintf("cpu-%s-%d", rt, i), nil, script)
			if err != nil {
				return rows, err
			}
			cpu[rt] = append(cpu[rt], time.Duration(run.Status.DurationMilliseconds)*time.Millisecond)
		}
	}
	rows = append(rows, runtimeRow(fmt.Sprintf("a CPU-bound Run (%d shell additions), its durationMilliseconds (%d reps)", loops, reps), cpu))

	syscallRows, err := b.syscallHeavy(ctx)
	rows = append(rows, syscallRows...)
	if err != nil {
		return rows, err
	}
	for _, sbx := range boxes {
		if err := b.deleteSandbox(ctx, sbx); err != nil {
			return rows, err
		}
	}

	memory, err := b.idleMemory(ctx)
	if err != nil {
		return rows, err
	}
	return append(rows, memory), nil
}

// runtimeSandbox is a Sandbox under the runtime.
func (b *bench) runtimeSandbox(name, runtime, image string) *afev1.Sandbox {
	sbx := b.sandboxObject(name, nil)
	sbx.Spec.Runtime = runtime
	sbx.Spec.Image = image
	return sbx
}

// syscallHeavy: a tree of RuntimeFiles small files made in the workspace,
// its tar, and its git commit with afe/git:dev, each a Run's own duration,
// once under each runtime.
func (b *bench) syscallHeavy(ctx context.Context) ([]row, error) {
	dirs := max(1, b.cfg.RuntimeFiles/100)
	files := dirs * 100
	steps := []struct{ title, script string }{
		{fmt.Sprintf("making a tree of %d small files in /workspace (a Run)", files), fmt.Sprintf(
			`mkdir /workspace/tree && cd /workspace/tree && for d in $(seq %d); do mkdir $d; for f in $(seq 100); do echo "$d $f" > $d/$f; done; done`, dirs)},
		{fmt.Sprintf("`tar` of the %d files (a Run)", files), `tar cf - -C /workspace tree | wc -c`},
		{fmt.Sprintf("`git add` and `git commit` of the %d files, %s (a Run)", files, gitImage),
			`cd /workspace/tree && git init -q && git add -A && git -c user.name=bench -c user.email=bench@localhost commit -qm tree && git rev-list --count HEAD`},
	}
	per := make([]map[string]sample, len(steps))
	for i := range per {
		per[i] = map[string]sample{}
	}
	for _, rt := range benchRuntimes {
		sbx, _, err := b.createSandboxObject(ctx, b.runtimeSandbox("files-"+rt, rt, gitImage))
		if err != nil {
			return nil, err
		}
		for i, step := range steps {
			_, run, err := b.runToEnd(ctx, sbx, fmt.Sprintf("files-%s-%d", rt, i), nil, step.script)
			if err != nil {
				return nil, err
			}
			per[i][rt] = append(per[i][rt], time.Duration(run.Status.DurationMilliseconds)*time.Millisecond)
		}
		if err := b.deleteSandbox(ctx, sbx); err != nil {
			return nil, err
		}
	}
	var rows []row
	for i, step := range steps {
		rows = append(rows, runtimeRow("syscall-heavy: "+step.title, per[i]))
	}
	return rows, nil
}

// idleMemory: RuntimeIdle Ready sandboxes left idle under each runtime,
// and the host memory each holds: the working set of its container's
// cgroup (runsc's sentry, gofer and stubs are in it) and the PSS of the
// host processes in that cgroup.
func (b *bench) idleMemory(ctx context.Context) (row, error) {
	n := b.cfg.RuntimeIdle
	workingSet, pss := map[string]float64{}, map[string]float64{}
	for _, rt := range benchRuntimes {
		var sbxs []*afev1.Sandbox
		for i := range n {
			sbx, _, err := b.createSandboxObject(ctx, b.runtimeSandbox(fmt.Sprintf("idle-%s-%d", rt, i), rt, b.cfg.Image))
			if err != nil {
				return row{}, err
			}
			sbxs = append(sbxs, sbx)
		}
		time.Sleep(3 * time.Second) // let them settle
		for _, sbx := range sbxs {
			c, err := b.engine.InspectContainer(ctx, sbx.Status.ContainerName)
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
		Scenario:   fmt.Sprintf("runsc against runc: host memory per idle sandbox (%d each; ratio of PSS)", n),
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

// runToEnd creates a Run (command or script) in the sandbox and waits until
// it ends, which must be a success; it returns the time from creation to
// the end, seen through a watch, and the Run.
func (b *bench) runToEnd(ctx context.Context, sbx *afev1.Sandbox, name string, command []string, script string) (time.Duration, *afev1.Run, error) {
	w, err := b.watch(ctx, &afev1.RunList{})
	if err != nil {
		return 0, nil, err
	}
	run := &afev1.Run{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: b.ns},
		Spec:       afev1.RunSpec{SandboxRef: afev1.SandboxReference{Name: sbx.Name}, Command: command, Script: script},
	}
	start := time.Now()
	if err := b.c.Create(ctx, run); err != nil {
		w.w.Stop()
		return 0, nil, err
	}
	seen, err := w.until(ctx, 10*time.Minute, []string{run.Name}, runEnded)
	if err != nil {
		return 0, nil, err
	}
	if err := b.c.Get(ctx, client.ObjectKeyFromObject(run), run); err != nil {
		return 0, nil, err
	}
	if run.Status.Phase != afev1.RunCompleted || !run.Status.Succeeded() {
		return 0, nil, fmt.Errorf("run %s ended %s, ok=%v: %s", run.Name, run.Status.Phase, run.Status.Succeeded(), run.Status.Output)
	}
	return seen[run.Name].Sub(start), run, nil
}
