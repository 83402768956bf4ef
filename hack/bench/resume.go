package main

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/naming"
	"afe.dev/sandbox/internal/sandboxspec"
)

// resumeIdle is the idle timeout of the resume scenario's sandbox.
const resumeIdle = 2

// resume: a sandbox suspended by its idle timeout and resumed by a Run of
// `true`, from the Run's creation to its start (Running seen), against
// `docker start` + `docker exec true` of a stopped CLI twin in the same run;
// then the memory a suspension frees, with and without egress.
// Long on purpose: a scenario reads top to bottom as the sequence it
// times, each step beside its CLI twin; split, the timing would be read
// across functions.
func (b *bench) resume(ctx context.Context) ([]row, error) {
	title := fmt.Sprintf("A Run on an idle-suspended sandbox, creation to Running (%d reps)", b.cfg.ResumeReps)
	b.logf("%s", title)
	sbx := b.sandboxObject("napper", nil)
	sbx.Spec.Lifecycle = &afev1.SandboxLifecycle{IdleTimeoutSeconds: resumeIdle}
	w, err := b.watch(ctx, &afev1.SandboxList{})
	if err != nil {
		return nil, err
	}
	if err := b.c.Create(ctx, sbx); err != nil {
		w.w.Stop()
		return nil, err
	}
	if _, err := w.until(ctx, time.Minute, []string{sbx.Name}, sandboxReady); err != nil {
		return nil, err
	}
	if err := b.c.Get(ctx, client.ObjectKeyFromObject(sbx), sbx); err != nil {
		return nil, err
	}
	twin, err := b.cliTwin(ctx, sbx, "napper")
	if err != nil {
		return nil, err
	}
	if err := twin.create(ctx); err != nil {
		return nil, err
	}
	defer func() { _ = twin.remove(context.WithoutCancel(ctx)) }()
	twinName := twin.sandbox.Name

	var controller, baseline sample
	for i := range b.cfg.ResumeReps {
		w, err := b.watch(ctx, &afev1.SandboxList{})
		if err != nil {
			return nil, err
		}
		if _, err := w.until(ctx, time.Minute, []string{sbx.Name}, sandboxSuspended); err != nil {
			return nil, fmt.Errorf("sandbox %s was not suspended: %w", sbx.Name, err)
		}
		rw, err := b.watch(ctx, &afev1.RunList{})
		if err != nil {
			return nil, err
		}
		run := &afev1.Run{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("wake-%d", i), Namespace: b.ns},
			Spec:       afev1.RunSpec{SandboxRef: afev1.SandboxReference{Name: sbx.Name}, Command: []string{"true"}},
		}
		start := time.Now()
		if err := b.c.Create(ctx, run); err != nil {
			rw.w.Stop()
			return nil, err
		}
		seen, err := rw.until(ctx, time.Minute, []string{run.Name}, runStarted)
		if err != nil {
			return nil, err
		}
		controller = append(controller, seen[run.Name].Sub(start))

		if err := dockerCLI(ctx, nil, "stop", "-t", "5", twinName); err != nil {
			return nil, err
		}
		d, err := timed(func() error {
			if err := dockerCLI(ctx, nil, "start", twinName); err != nil {
				return err
			}
			return dockerCLI(ctx, nil, "exec", "-u", sbx.Spec.User, "-w", sandboxspec.WorkspacePath, twinName, "true")
		})
		if err != nil {
			return nil, err
		}
		baseline = append(baseline, d)
	}
	rows := []row{timing(title, controller, baseline, "`docker start` + `docker exec`")}
	for _, egress := range [][]afev1.EgressHost{nil, {"example.com"}} {
		r, err := b.suspensionMemory(ctx, egress)
		if err != nil {
			return rows, err
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// suspensionMemory is the memory a suspension frees: the working set of the
// sandbox's container (and proxy) just before spec.suspend stops them.
func (b *bench) suspensionMemory(ctx context.Context, egress []afev1.EgressHost) (row, error) {
	what, name := "without egress", "mem"
	if len(egress) > 0 {
		what, name = "with egress (container and proxy)", "mem-egress"
	}
	sbx, _, err := b.createSandbox(ctx, name, egress)
	if err != nil {
		return row{}, err
	}
	time.Sleep(2 * time.Second) // let the proxy settle
	id := sandboxspec.IdentityOf(sbx, b.instance)
	var used uint64
	for _, c := range []string{naming.Container(id.Key), naming.Proxy(id.Key)} {
		if len(egress) == 0 && c == naming.Proxy(id.Key) {
			continue
		}
		u, err := b.engine.ContainerUsage(ctx, c)
		if err != nil {
			return row{}, fmt.Errorf("usage of %s: %w", c, err)
		}
		used += u.MemoryBytes
	}
	w, err := b.watch(ctx, &afev1.SandboxList{})
	if err != nil {
		return row{}, err
	}
	// A patch of spec.suspend alone, as kubectl afe suspend makes it: the
	// controller may have written the status since sbx was read.
	suspend := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"suspend":true}}`))
	start := time.Now()
	if err := b.c.Patch(ctx, sbx, suspend); err != nil {
		w.w.Stop()
		return row{}, err
	}
	seen, err := w.until(ctx, time.Minute, []string{sbx.Name}, sandboxSuspended)
	if err != nil {
		return row{}, err
	}
	return row{
		Scenario: "Memory a suspension frees, " + what,
		Controller: fmt.Sprintf("%.1f MiB working set stopped; suspended in %s",
			float64(used)/(1<<20), seconds(seen[sbx.Name].Sub(start))),
		Baseline: "-", Ratio: "-",
	}, b.deleteSandbox(ctx, sbx)
}

func sandboxSuspended(o client.Object) bool {
	return o.(*afev1.Sandbox).Status.Phase == afev1.SandboxSuspended
}

func runStarted(o client.Object) bool {
	p := o.(*afev1.Run).Status.Phase
	return p == afev1.RunRunning || p.Terminal()
}
