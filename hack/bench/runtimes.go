package main

import (
	"context"
	"fmt"
	"os/exec"
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

// runtimes: runsc against runc in one run (the runtimes themselves,
// creation cold, from a warm pool and with egress, Runs, exec, CPU-bound,
// process-heavy and file-heavy work, idle memory of a sandbox and of its
// proxy).
// Long on purpose: a scenario reads top to bottom as the sequence it
// times, each step beside its CLI twin; split, the timing would be read
// across functions.
func (b *bench) runtimes(ctx context.Context) ([]row, error) {
	reps := b.cfg.RuntimeReps
	b.logf("runsc against runc (%d reps, %d files, %d idle sandboxes each)", reps, b.cfg.RuntimeFiles, b.cfg.RuntimeIdle)
	versions, err := b.runtimeVersions(ctx)
	if err != nil {
		return nil, err
	}
	rows := []row{versions}

	created, err := alternately(reps, func(i int, rt string) (time.Duration, error) {
		return b.createThenDelete(ctx, b.runtimeSandbox(fmt.Sprintf("create-%s-%d", rt, i), rt, b.cfg.Image))
	})
	if err != nil {
		return rows, err
	}
	rows = append(rows, runtimeRow(fmt.Sprintf("one Sandbox, creation to Ready (%d reps)", reps), created))

	pooled, err := b.runtimePools(ctx)
	if err != nil {
		return rows, err
	}
	rows = append(rows, pooled)

	egress, err := alternately(reps, func(i int, rt string) (time.Duration, error) {
		sbx := b.runtimeSandbox(fmt.Sprintf("egress-%s-%d", rt, i), rt, b.cfg.Image)
		sbx.Spec.Egress = []afev1.EgressHost{"example.com"}
		return b.createThenDelete(ctx, sbx)
	})
	if err != nil {
		return rows, err
	}
	rows = append(rows, runtimeRow(fmt.Sprintf("one Sandbox with egress (network, proxy under runc, container), creation to Ready (%d reps)", reps), egress))

	boxes := map[string]*afev1.Sandbox{}
	for _, rt := range benchRuntimes {
		sbx, _, err := b.createSandboxObject(ctx, b.runtimeSandbox("box-"+rt, rt, b.cfg.Image))
		if err != nil {
			return rows, err
		}
		boxes[rt] = sbx
	}

	trueRuns, err := alternately(reps, func(i int, rt string) (time.Duration, error) {
		d, _, err := b.runToEnd(ctx, boxes[rt], fmt.Sprintf("true-%s-%d", rt, i), []string{"true"}, "")
		return d, err
	})
	if err != nil {
		return rows, err
	}
	rows = append(rows, runtimeRow(fmt.Sprintf("a Run of `true`, creation to Completed (%d reps)", reps), trueRuns))

	for _, rt := range benchRuntimes {
		// Once unmeasured: discovery and the first TLS sessions.
		if err := waitFor(ctx, time.Minute, func() error { return b.pluginExec(ctx, boxes[rt].Name) }); err != nil {
			return rows, err
		}
	}
	execs, err := alternately(reps, func(_ int, rt string) (time.Duration, error) {
		return timed(func() error { return b.pluginExec(ctx, boxes[rt].Name) })
	})
	if err != nil {
		return rows, err
	}
	rows = append(rows, runtimeRow(fmt.Sprintf("`kubectl afe exec SANDBOX -- true`, as a whole process (%d reps)", reps), execs))

	// The Runs' own durations (status.durationMilliseconds), without the
	// Run's start. CPU-bound: shell arithmetic, no system call in the
	// loop. Process-heavy: a fork and an exec of a binary each time round.
	const loops, forks = 400000, 200
	for _, w := range []struct{ name, title, script string }{
		{"cpu", fmt.Sprintf("a CPU-bound Run (%d shell additions), its durationMilliseconds (%d reps)", loops, reps),
			fmt.Sprintf("i=0; while [ $i -lt %d ]; do i=$((i+1)); done", loops)},
		{"fork", fmt.Sprintf("a Run of %d fork+exec of /bin/true, its durationMilliseconds (%d reps)", forks, reps),
			fmt.Sprintf("i=0; while [ $i -lt %d ]; do /bin/true; i=$((i+1)); done", forks)},
	} {
		per, err := alternately(reps, func(i int, rt string) (time.Duration, error) {
			return b.runDuration(ctx, boxes[rt], fmt.Sprintf("%s-%s-%d", w.name, rt, i), w.script)
		})
		if err != nil {
			return rows, err
		}
		rows = append(rows, runtimeRow(w.title, per))
	}

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

	n := b.cfg.RuntimeIdle
	memory, err := b.idleMemory(ctx, fmt.Sprintf("host memory per idle sandbox (%d each; ratio of PSS)", n), "idle", nil,
		func(sbx *afev1.Sandbox) string { return sbx.Status.ContainerName })
	if err != nil {
		return rows, err
	}
	rows = append(rows, memory)
	// The proxy runs under runc whatever the sandbox's runtime: the row
	// shows what a proxy costs beside each, not squid under gVisor.
	memory, err = b.idleMemory(ctx, fmt.Sprintf("host memory per egress proxy, the proxy under runc beside either (%d idle sandboxes with egress each; ratio of PSS)", n),
		"proxy", []afev1.EgressHost{"example.com"}, func(sbx *afev1.Sandbox) string { return sbx.Status.ProxyName })
	return append(rows, memory), err
}

// alternately takes reps samples of measure under each runtime, the
// runtimes in turn within each rep.
func alternately(reps int, measure func(i int, runtime string) (time.Duration, error)) (map[string]sample, error) {
	per := map[string]sample{}
	for i := range reps {
		for _, rt := range benchRuntimes {
			d, err := measure(i, rt)
			if err != nil {
				return per, err
			}
			per[rt] = append(per[rt], d)
		}
	}
	return per, nil
}

// createThenDelete creates the Sandbox, returns the time from the create
// call to Ready, and deletes it.
func (b *bench) createThenDelete(ctx context.Context, sbx *afev1.Sandbox) (time.Duration, error) {
	sbx, d, err := b.createSandboxObject(ctx, sbx)
	if err != nil {
		return 0, err
	}
	return d, b.deleteSandbox(ctx, sbx)
}

// runtimePools: one Sandbox taken from a warm pool of its runtime (a pool
// of two per runtime, the same template but for the runtime), creation to
// Ready, alternately, as the pool scenario takes them. The pools are gone
// when it returns: an unnamed Sandbox of their shape would take their
// members.
func (b *bench) runtimePools(ctx context.Context) (row, error) {
	pools := map[string]*afev1.SandboxPool{}
	for _, rt := range benchRuntimes {
		p, err := b.createPool(ctx, "warm-"+rt, 2, b.runtimeSandbox("", rt, b.cfg.Image).Spec.SandboxTemplateSpec)
		if err != nil {
			return row{}, err
		}
		pools[rt] = p
	}
	per, err := alternately(b.cfg.RuntimeReps, func(i int, rt string) (time.Duration, error) {
		sbx, d, err := b.claimWarm(ctx, pools[rt], b.runtimeSandbox(fmt.Sprintf("warm-%s-%d", rt, i), rt, b.cfg.Image))
		if err != nil {
			return 0, err
		}
		return d, b.deleteSandbox(ctx, sbx)
	})
	for _, p := range pools {
		err = joinErr(err, b.deletePool(ctx, p))
	}
	return runtimeRow(fmt.Sprintf("one Sandbox from a warm pool of its runtime, creation to Ready (%d reps)", b.cfg.RuntimeReps), per), err
}

// runDuration runs the script in the sandbox to its end and returns the
// Run's own duration (status.durationMilliseconds).
func (b *bench) runDuration(ctx context.Context, sbx *afev1.Sandbox, name, script string) (time.Duration, error) {
	_, run, err := b.runToEnd(ctx, sbx, name, nil, script)
	if err != nil {
		return 0, err
	}
	return time.Duration(run.Status.DurationMilliseconds) * time.Millisecond, nil
}

// runtimeVersions is the row that names the runtimes compared, as the
// engine runs them: each one's version (the first line of its
// `--version`), and for runsc its platform and the arguments the engine
// gives it.
func (b *bench) runtimeVersions(ctx context.Context) (row, error) {
	described := map[string]string{}
	for _, name := range benchRuntimes {
		rt, err := b.engine.Runtime(ctx, name)
		if err != nil {
			return row{}, err
		}
		out, err := exec.CommandContext(ctx, rt.Path, "--version").Output()
		if err != nil {
			return row{}, fmt.Errorf("%s --version: %w", rt.Path, err)
		}
		version, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
		described[name] = version
		if name == "runsc" {
			described[name] += fmt.Sprintf(", platform %s (the engine runs %s)", runscPlatform(rt.Args), strings.Join(append([]string{rt.Path}, rt.Args...), " "))
		}
	}
	return row{Scenario: "runsc against runc: the runtimes compared", Controller: described["runsc"], Baseline: described["runc"], Ratio: "-"}, nil
}

// runscPlatform is the platform runsc's arguments name, or runsc's default.
func runscPlatform(args []string) string {
	for _, a := range args {
		if p, ok := strings.CutPrefix(a, "--platform="); ok {
			return p
		}
	}
	return "runsc's default"
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
			d, err := b.runDuration(ctx, sbx, fmt.Sprintf("files-%s-%d", rt, i), step.script)
			if err != nil {
				return nil, err
			}
			per[i][rt] = append(per[i][rt], d)
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
