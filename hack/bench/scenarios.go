package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/sandboxspec"
)

func (b *bench) sandboxObject(name string, egress []afev1.EgressHost) *afev1.Sandbox {
	return &afev1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: b.ns},
		Spec:       afev1.SandboxSpec{SandboxTemplateSpec: afev1.SandboxTemplateSpec{Image: b.cfg.Image, Egress: egress}},
	}
}

// createSandbox creates a Sandbox and returns it once Ready, with the time
// from the create call to Ready seen through a watch.
func (b *bench) createSandbox(ctx context.Context, name string, egress []afev1.EgressHost) (*afev1.Sandbox, time.Duration, error) {
	return b.createSandboxObject(ctx, b.sandboxObject(name, egress))
}

// createSandboxObject creates the Sandbox and returns it once Ready, with
// the time from the create call to Ready seen through a watch.
func (b *bench) createSandboxObject(ctx context.Context, sbx *afev1.Sandbox) (*afev1.Sandbox, time.Duration, error) {
	name := sbx.Name
	w, err := b.watch(ctx, &afev1.SandboxList{})
	if err != nil {
		return nil, 0, err
	}
	start := time.Now()
	if err := b.c.Create(ctx, sbx); err != nil {
		w.w.Stop()
		return nil, 0, err
	}
	seen, err := w.until(ctx, time.Minute, []string{name}, sandboxReady)
	if err != nil {
		return nil, 0, fmt.Errorf("sandbox %s: %w", name, err)
	}
	if err := b.c.Get(ctx, client.ObjectKeyFromObject(sbx), sbx); err != nil {
		return nil, 0, err
	}
	return sbx, seen[name].Sub(start), nil
}

func (b *bench) deleteSandbox(ctx context.Context, sbx *afev1.Sandbox) error {
	w, err := b.watch(ctx, &afev1.SandboxList{})
	if err != nil {
		return err
	}
	if err := b.c.Delete(ctx, sbx); err != nil {
		w.w.Stop()
		return err
	}
	_, err = w.until(ctx, time.Minute, []string{sbx.Name}, nil)
	return err
}

// cliTwin is the baseline's copy of a Sandbox the controller made: the same
// objects under another name and instance.
func (b *bench) cliTwin(ctx context.Context, sbx *afev1.Sandbox, tag string) (cliSandbox, error) {
	twin := sbx.DeepCopy()
	twin.Name = "cli-" + tag
	twin.UID = types.UID("cli-" + tag + "-" + string(sbx.UID))
	proxy := sandboxspec.ProxyOptions{Image: b.cfg.ProxyImage, EgressNetwork: b.egressNet}
	if len(sbx.Spec.Egress) > 0 {
		n, err := b.engine.InspectNetwork(ctx, b.egressNet)
		if err != nil {
			return cliSandbox{}, err
		}
		proxy.DenyIPs = n.Gateways
	}
	return newCLISandbox(twin, b.cliInstance, proxy), nil
}

// oneSandbox: one Sandbox without egress, creation to Ready, against the
// CLI making its volume and container, alternately.
func (b *bench) oneSandbox(ctx context.Context) ([]row, error) {
	return b.sandboxes(ctx, fmt.Sprintf("One Sandbox without egress, creation to Ready (%d reps)", b.cfg.Reps), "plain", nil, b.cfg.Reps)
}

// oneSandboxWithEgress: the same with a network and a proxy.
func (b *bench) oneSandboxWithEgress(ctx context.Context) ([]row, error) {
	return b.sandboxes(ctx, fmt.Sprintf("One Sandbox with egress (network, proxy, container), creation to Ready (%d reps)", b.cfg.EgressReps),
		"egress", []afev1.EgressHost{"example.com"}, b.cfg.EgressReps)
}

func (b *bench) sandboxes(ctx context.Context, title, prefix string, egress []afev1.EgressHost, reps int) ([]row, error) {
	b.logf("%s", title)
	var controller, baseline sample
	for i := range reps {
		sbx, d, err := b.createSandbox(ctx, fmt.Sprintf("%s-%d", prefix, i), egress)
		if err != nil {
			return nil, err
		}
		controller = append(controller, d)
		cli, err := b.twinThenRemove(ctx, sbx, fmt.Sprintf("%s-%d", prefix, i))
		if err != nil {
			return nil, err
		}
		baseline = append(baseline, cli)
	}
	return []row{timing(title, controller, baseline, "sequential")}, nil
}

// loss: the sandbox container removed by hand (`docker rm -f`), from its
// destruction to its replacement's start, both as the engine's events time
// them; against a script that sees the loss at once and makes a fresh
// workspace and container with the CLI.
// Long on purpose: a scenario reads top to bottom as the sequence it
// times, each step beside its CLI twin; split, the timing would be read
// across functions.
func (b *bench) loss(ctx context.Context) ([]row, error) {
	title := fmt.Sprintf("Container removed by hand, until the replacement runs (%d reps)", b.cfg.LossReps)
	b.logf("%s", title)
	sbx, _, err := b.createSandbox(ctx, "loss", nil)
	if err != nil {
		return nil, err
	}
	twin, err := b.cliTwin(ctx, sbx, "loss")
	if err != nil {
		return nil, err
	}
	if err := twin.create(ctx); err != nil {
		return nil, err
	}
	defer func() { _ = twin.remove(context.WithoutCancel(ctx)) }()

	evCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	events, errs := b.engine.Events(evCtx, map[string]string{
		afev1.LabelController: b.instance, afev1.LabelSandbox: sbx.Name, afev1.LabelRole: afev1.RoleSandbox}, time.Time{})
	var controller, baseline sample
	for i := range b.cfg.LossReps {
		old, err := b.engine.InspectContainer(ctx, sbx.Status.ContainerName)
		if err != nil {
			return nil, err
		}
		w, err := b.watch(ctx, &afev1.SandboxList{})
		if err != nil {
			return nil, err
		}
		if err := dockerCLI(ctx, nil, "rm", "-f", old.ID); err != nil {
			w.w.Stop()
			return nil, err
		}
		var destroyed, started time.Time
		for started.IsZero() {
			select {
			case ev := <-events:
				switch {
				case ev.Action == docker.ActionDestroy && ev.ID == old.ID:
					destroyed = ev.Time
				case ev.Action == docker.ActionStart && ev.ID != old.ID && !destroyed.IsZero():
					started = ev.Time
				}
			case err := <-errs:
				w.w.Stop()
				return nil, fmt.Errorf("docker events: %w", err)
			case <-time.After(time.Minute):
				w.w.Stop()
				return nil, fmt.Errorf("no replacement for %s within a minute", old.Name)
			}
		}
		controller = append(controller, started.Sub(destroyed))
		recreated := int32(i + 1)
		if _, err := w.until(ctx, time.Minute, []string{sbx.Name}, func(o client.Object) bool {
			return sandboxReady(o) && o.(*afev1.Sandbox).Status.Recreations >= recreated
		}); err != nil {
			return nil, err
		}

		if err := dockerCLI(ctx, nil, "rm", "-f", twin.sandbox.Name); err != nil {
			return nil, err
		}
		start := time.Now()
		if err := twin.replace(ctx); err != nil {
			return nil, err
		}
		baseline = append(baseline, time.Since(start))
	}
	return []row{timing(title, controller, baseline, "sequential")}, nil
}

// runTrue: a Run of `true`, creation to Completed, against `docker exec`.
func (b *bench) runTrue(ctx context.Context) ([]row, error) {
	title := fmt.Sprintf("A Run of `true`, creation to Completed (%d reps)", b.cfg.RunReps)
	b.logf("%s", title)
	sbx, _, err := b.createSandbox(ctx, "runner", nil)
	if err != nil {
		return nil, err
	}
	var controller, baseline sample
	for i := range b.cfg.RunReps {
		w, err := b.watch(ctx, &afev1.RunList{})
		if err != nil {
			return nil, err
		}
		run := &afev1.Run{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("true-%d", i), Namespace: b.ns},
			Spec:       afev1.RunSpec{SandboxRef: afev1.SandboxReference{Name: sbx.Name}, Command: []string{"true"}},
		}
		start := time.Now()
		if err := b.c.Create(ctx, run); err != nil {
			w.w.Stop()
			return nil, err
		}
		seen, err := w.until(ctx, time.Minute, []string{run.Name}, runEnded)
		if err != nil {
			return nil, err
		}
		controller = append(controller, seen[run.Name].Sub(start))
		if err := b.c.Get(ctx, client.ObjectKeyFromObject(run), run); err != nil {
			return nil, err
		}
		if run.Status.Phase != afev1.RunCompleted || !run.Status.Succeeded() {
			return nil, fmt.Errorf("run %s ended %s, ok=%v", run.Name, run.Status.Phase, run.Status.Succeeded())
		}

		start = time.Now()
		if err := dockerCLI(ctx, nil, "exec", "-u", sbx.Spec.User, "-w", sandboxspec.WorkspacePath, sbx.Status.ContainerName, "true"); err != nil {
			return nil, err
		}
		baseline = append(baseline, time.Since(start))
	}
	return []row{timing(title, controller, baseline, "`docker exec`")}, nil
}

// execTrue: `kubectl afe exec SANDBOX -- true` (the plugin through the
// API server and the manager's access API) against `docker exec C true`,
// both as whole processes, alternating, in the same sandbox.
func (b *bench) execTrue(ctx context.Context) ([]row, error) {
	title := fmt.Sprintf("`kubectl afe exec SANDBOX -- true`, as a whole process (%d reps)", b.cfg.RunReps)
	b.logf("%s", title)
	sbx, _, err := b.createSandbox(ctx, "exec", nil)
	if err != nil {
		return nil, err
	}
	plugin := func() error { return b.pluginExec(ctx, sbx.Name) }
	// Once unmeasured: the APIService's discovery and the first TLS
	// sessions.
	if err := waitFor(ctx, time.Minute, plugin); err != nil {
		return nil, err
	}
	var controller, baseline sample
	for range b.cfg.RunReps {
		d, err := timed(plugin)
		if err != nil {
			return nil, err
		}
		controller = append(controller, d)
		d, err = timed(func() error {
			return dockerCLI(ctx, nil, "exec", "-u", sbx.Spec.User, "-w", sandboxspec.WorkspacePath, sbx.Status.ContainerName, "true")
		})
		if err != nil {
			return nil, err
		}
		baseline = append(baseline, d)
	}
	return []row{timing(title, controller, baseline, "`docker exec C true`")}, nil
}

// pluginExec runs `kubectl afe exec SANDBOX -- true` as a whole process.
func (b *bench) pluginExec(ctx context.Context, sandbox string) error {
	cmd := exec.CommandContext(ctx, b.cfg.Plugin, "--kubeconfig", b.kubeconfig, "-n", b.ns, "exec", sandbox, "--", "true")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("kubectl afe exec: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// waitFor retries f until it succeeds or the timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// manyTickets: N Tickets created at once until all Ready, then set Done
// until no labelled object is left; against the CLI making and removing N
// sandboxes sequentially and 4 at a time.
// Long on purpose: a scenario reads top to bottom as the sequence it
// times, each step beside its CLI twin; split, the timing would be read
// across functions.
func (b *bench) manyTickets(ctx context.Context) ([]row, error) {
	n := b.cfg.Tickets
	b.logf("%d Tickets at once", n)
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("ticket-%d", i)
	}
	w, err := b.watch(ctx, &afev1.TicketList{})
	if err != nil {
		return nil, err
	}
	stopProfile := b.cpuProfile("cpu-tickets.pprof")
	start := time.Now()
	if err := inParallel(n, 8, func(i int) error {
		return b.c.Create(ctx, &afev1.Ticket{
			ObjectMeta: metav1.ObjectMeta{Name: names[i], Namespace: b.ns},
			Spec:       afev1.TicketSpec{Sandbox: afev1.SandboxTemplateSpec{Image: b.cfg.Image}},
		})
	}); err != nil {
		w.w.Stop()
		return nil, err
	}
	seen, err := w.until(ctx, 10*time.Minute, names, ticketReady)
	if err != nil {
		return nil, err
	}
	created := latest(seen).Sub(start)

	sbx := &afev1.Sandbox{}
	if err := b.c.Get(ctx, client.ObjectKey{Namespace: b.ns, Name: names[0]}, sbx); err != nil {
		return nil, err
	}
	seq, par := make([]cliSandbox, n), make([]cliSandbox, n)
	for i := range n {
		if seq[i], err = b.cliTwin(ctx, sbx, fmt.Sprintf("seq-%d", i)); err != nil {
			return nil, err
		}
		if par[i], err = b.cliTwin(ctx, sbx, fmt.Sprintf("par-%d", i)); err != nil {
			return nil, err
		}
	}
	seqCreate, err := timed(func() error { return inParallel(n, 1, func(i int) error { return seq[i].create(ctx) }) })
	if err != nil {
		return nil, err
	}
	parCreate, err := timed(func() error { return inParallel(n, b.cfg.Parallel, func(i int) error { return par[i].create(ctx) }) })
	if err != nil {
		return nil, err
	}

	b.logf("%d Tickets set Done", n)
	gone, err := b.watchGone(ctx, map[string]string{afev1.LabelController: b.instance, afev1.LabelNamespace: b.ns})
	if err != nil {
		return nil, err
	}
	start = time.Now()
	if err := inParallel(n, 8, func(i int) error {
		patch := []byte(`{"spec":{"state":"Done"}}`)
		return b.c.Patch(ctx, &afev1.Ticket{ObjectMeta: metav1.ObjectMeta{Name: names[i], Namespace: b.ns}},
			client.RawPatch(types.MergePatchType, patch))
	}); err != nil {
		return nil, err
	}
	b.logf("%d Tickets patched in %s", n, seconds(time.Since(start)))
	last, err := gone.wait(5 * time.Minute)
	if err == nil {
		err = b.waitNoObjects(ctx, time.Minute) // and nothing else was left
	}
	if err != nil {
		return nil, err
	}
	cleaned := last.Sub(start)
	stopProfile()
	seqRemove, err := timed(func() error { return inParallel(n, 1, func(i int) error { return seq[i].remove(ctx) }) })
	if err != nil {
		return nil, err
	}
	parRemove, err := timed(func() error { return inParallel(n, b.cfg.Parallel, func(i int) error { return par[i].remove(ctx) }) })
	if err != nil {
		return nil, err
	}
	parallel := fmt.Sprintf("%d-parallel", b.cfg.Parallel)
	return []row{
		{
			Scenario:   fmt.Sprintf("%d Tickets created at once, until all Ready", n),
			Controller: seconds(created),
			Baseline:   fmt.Sprintf("%s %s (sequential %s)", parallel, seconds(parCreate), seconds(seqCreate)),
			Ratio:      ratio(created, parCreate),
		},
		{
			Scenario:   fmt.Sprintf("%d Tickets set Done, until no labelled object is left", n),
			Controller: seconds(cleaned),
			Baseline:   fmt.Sprintf("%s %s (sequential %s)", parallel, seconds(parRemove), seconds(seqRemove)),
			Ratio:      ratio(cleaned, parRemove),
		},
	}, nil
}

// waitNoObjects polls the engine until no object of the controller is left.
func (b *bench) waitNoObjects(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		n, err := labelled(ctx, b.engine, map[string]string{afev1.LabelController: b.instance, afev1.LabelNamespace: b.ns})
		if err != nil || n == 0 {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d labelled objects left after %s", n, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// idle: N Ready sandboxes left alone: the Docker requests the controller
// makes meanwhile, its CPU time and its resident memory. Then the host
// memory per sandbox as their count falls (the first row keeps the
// series).
// Long on purpose: a scenario reads top to bottom as the sequence it
// times, each step beside its CLI twin; split, the timing would be read
// across functions.
func (b *bench) idle(ctx context.Context) ([]row, error) {
	n := b.cfg.Idle
	b.logf("%d Sandboxes, then idle for %s", n, b.cfg.IdleFor)
	memBefore, err := memAvailable()
	if err != nil {
		return nil, err
	}
	names, start, seen, err := b.createAtOnce(ctx, "idle", n, nil, 15*time.Minute, nil)
	if err != nil {
		return nil, err
	}
	created := latest(seen).Sub(start)
	if err := b.settle(ctx, time.Minute); err != nil { // let the last reconciles end
		return nil, err
	}
	memAfter, err := memAvailable()
	if err != nil {
		return nil, err
	}
	perSandbox := (memBefore - memAfter) / int64(n)

	before, err := b.dockerRequests()
	if err != nil {
		return nil, err
	}
	cpu0, _, err := b.procStats()
	if err != nil {
		return nil, err
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(b.cfg.IdleFor):
	}
	after, err := b.dockerRequests()
	if err != nil {
		return nil, err
	}
	cpu1, rss, err := b.procStats()
	if err != nil {
		return nil, err
	}
	b.profile("heap", "", filepath.Join(b.cfg.Out, "heap-idle.pprof"))
	memory, err := b.memoryAsCountFalls(ctx, names, memBefore)
	if err != nil {
		return nil, err
	}
	memory = append(memory, memoryPoint{Count: n, PerSandbox: float64(perSandbox) / (1 << 20)})
	total, byOp := 0.0, []string{}
	for op, v := range after {
		if d := v - before[op]; d > 0 {
			total += d
			byOp = append(byOp, fmt.Sprintf("%s %.0f", op, d))
		}
	}
	slices.Sort(byOp)
	detail := "none"
	if len(byOp) > 0 {
		detail = strings.Join(byOp, ", ")
	}
	return []row{
		{
			Scenario: fmt.Sprintf("%d Sandboxes created at once, until all Ready", n),
			Controller: fmt.Sprintf("%s; host memory %.1f MiB per sandbox (engine, shim and container)",
				seconds(created), float64(perSandbox)/(1<<20)),
			Baseline: "-", Ratio: "-",
			Memory: &memorySeries{Label: "without egress", Unit: "MiB", Points: memory},
		},
		{
			Scenario: fmt.Sprintf("%d Ready sandboxes idle for %s", n, b.cfg.IdleFor),
			Controller: fmt.Sprintf("%.0f Docker requests (%s); CPU %.2f s; RSS %d MiB",
				total, detail, (cpu1 - cpu0).Seconds(), rss>>20),
			Baseline: "-", Ratio: "-",
		},
	}, nil
}

// createAtOnce creates the Sandboxes prefix-0 to prefix-(n-1), eight
// create calls at a time, each once allow (when set) lets it, and returns
// their names, when the first call was made and when each was first Ready.
func (b *bench) createAtOnce(ctx context.Context, prefix string, n int, egress []afev1.EgressHost,
	timeout time.Duration, allow func(made int) error) ([]string, time.Time, map[string]time.Time, error) {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	w, err := b.watch(ctx, &afev1.SandboxList{})
	if err != nil {
		return nil, time.Time{}, nil, err
	}
	var made atomic.Int32
	start := time.Now()
	if err := inParallel(n, 8, func(i int) error {
		if allow != nil {
			if err := allow(int(made.Load())); err != nil {
				return err
			}
		}
		made.Add(1)
		return b.c.Create(ctx, b.sandboxObject(names[i], egress))
	}); err != nil {
		w.w.Stop()
		return nil, start, nil, err
	}
	seen, err := w.until(ctx, timeout, names, sandboxReady)
	return names, start, seen, err
}

// cpuProfile starts a CPU profile of the manager and one of the API server
// (apiserver-FILE), when profiling, and returns the function that waits
// for them: profiles run for a fixed time.
func (b *bench) cpuProfile(file string) (wait func()) {
	if !b.cfg.Profile {
		return func() {}
	}
	var wg sync.WaitGroup
	wg.Go(func() { b.profile("profile", "?seconds=30", filepath.Join(b.cfg.Out, file)) })
	wg.Go(func() { b.apiserverProfile(30*time.Second, filepath.Join(b.cfg.Out, "apiserver-"+file)) })
	return wg.Wait
}

func latest(seen map[string]time.Time) time.Time {
	var t time.Time
	for _, s := range seen {
		if s.After(t) {
			t = s
		}
	}
	return t
}

func timed(f func() error) (time.Duration, error) {
	start := time.Now()
	err := f()
	return time.Since(start), err
}

// twinThenRemove times the plain CLI making the twin of sbx (its name
// tagged with tag), then removes the twin and the Sandbox.
func (b *bench) twinThenRemove(ctx context.Context, sbx *afev1.Sandbox, tag string) (time.Duration, error) {
	twin, err := b.cliTwin(ctx, sbx, tag)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	if err := twin.create(ctx); err != nil {
		return 0, err
	}
	took := time.Since(start)
	return took, joinErr(twin.remove(ctx), b.deleteSandbox(ctx, sbx))
}
