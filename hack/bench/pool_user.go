package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// userTemplate is the sandbox a user's ticket asks for in the user
// scenario, which plainRunArgs makes with the CLI.
func (b *bench) userTemplate() afev1.SandboxTemplateSpec {
	cpu, mem := resource.MustParse(userCPU), resource.MustParse(userMemory)
	return afev1.SandboxTemplateSpec{Image: b.cfg.Image,
		Resources: afev1.SandboxResources{CPU: &cpu, Memory: &mem, Pids: userPids}}
}

// poolKubectl: one Sandbox from a warm pool as a user times it (`kubectl
// apply` of the Sandbox, then `kubectl wait` for Ready: two kubectl
// processes), against the plain `docker run -d ... -v` of the same
// container, alternately.
func (b *bench) poolKubectl(ctx context.Context) ([]row, error) {
	title := fmt.Sprintf("One Sandbox from a warm pool, `kubectl apply` then `kubectl wait` (%d reps)", b.cfg.Reps)
	b.logf("%s", title)
	p, err := b.createPool(ctx, "user", 2, b.userTemplate())
	if err != nil {
		return nil, err
	}
	defer func() { _ = b.deletePool(ctx, p) }()
	label := afev1.LabelController + "=" + b.cliInstance
	var warm, baseline sample
	for i := range b.cfg.Reps {
		if err := b.waitPoolReady(ctx, p, 2); err != nil {
			return nil, err
		}
		name := fmt.Sprintf("user-pooled-%d", i)
		file, err := b.sandboxFile(name, p.Name)
		if err != nil {
			return nil, err
		}
		if i == 0 { // unmeasured: the discovery a user's kubectl has cached
			if err := b.kubectl(ctx, "apply", "--dry-run=server", "-f", file); err != nil {
				return nil, err
			}
		}
		d, err := timed(func() error {
			if err := b.kubectl(ctx, "apply", "-f", file); err != nil {
				return err
			}
			return b.kubectl(ctx, "wait", "--for=condition=Ready", "-n", b.ns, "sandbox/"+name, "--timeout=2m")
		})
		if err != nil {
			return nil, err
		}
		sbx := &afev1.Sandbox{}
		if err := b.c.Get(ctx, client.ObjectKey{Namespace: b.ns, Name: name}, sbx); err != nil {
			return nil, err
		}
		if sbx.Status.Pool != p.Name {
			return nil, fmt.Errorf("sandbox %s was not served from the pool (status.pool %q)", name, sbx.Status.Pool)
		}
		warm = append(warm, d)
		plain := fmt.Sprintf("afebench-%s-user-pooled-%d", b.cliInstance, i)
		d, err = timed(func() error { return dockerCLI(ctx, nil, plainRunArgs(plain, b.cfg.Image, label)...) })
		b.removePlain([]string{plain})
		if err != nil {
			return nil, err
		}
		baseline = append(baseline, d)
		if err := b.deleteSandbox(ctx, sbx); err != nil {
			return nil, err
		}
	}
	return []row{timing(title, warm, baseline, "plain `docker run -d ... -v`")}, nil
}

// sandboxFile writes the manifest of a user's Sandbox of userTemplate that
// names the pool, as kubectl applies it.
func (b *bench) sandboxFile(name, pool string) (string, error) {
	sbx := afev1.Sandbox{
		TypeMeta:   metav1.TypeMeta{APIVersion: afev1.GroupVersion.String(), Kind: "Sandbox"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: b.ns},
		Spec:       afev1.SandboxSpec{SandboxTemplateSpec: b.userTemplate()},
	}
	sbx.Spec.PoolRef = &afev1.PoolReference{Name: pool}
	y, err := yaml.Marshal(&sbx)
	if err != nil {
		return "", err
	}
	file := filepath.Join(b.cfg.Out, name+".yaml")
	return file, os.WriteFile(file, y, 0o644)
}

// poolMemory: the host memory an idle member costs, against a container
// the plain `docker run -d ... -v` makes: each the fall of the host's
// MemAvailable while n of them run, from a host where the other's were
// removed. The engine's own heap grows for the first n containers it holds
// and does not shrink after: n plain containers made and removed first,
// unmeasured, leave it grown for both.
func (b *bench) poolMemory(ctx context.Context, n int) ([]row, error) {
	title := fmt.Sprintf("Host memory per idle member of a pool of %d", n)
	b.logf("%s", title)
	plain := make([]string, n)
	for i := range plain {
		plain[i] = fmt.Sprintf("afebench-%s-idle-%d", b.cliInstance, i)
	}
	defer b.removePlain(plain)
	label := afev1.LabelController + "=" + b.cliInstance
	if err := b.xargs(ctx, plain, func(name string) []string { return plainRunArgs(name, b.cfg.Image, label) }); err != nil {
		return nil, err
	}
	b.removePlain(plain)
	container, err := memoryOf(n, func() error {
		return b.xargs(ctx, plain, func(name string) []string { return plainRunArgs(name, b.cfg.Image, label) })
	})
	if err != nil {
		return nil, err
	}
	b.removePlain(plain)
	p := &afev1.SandboxPool{ObjectMeta: metav1.ObjectMeta{Name: "idle", Namespace: b.ns},
		Spec: afev1.SandboxPoolSpec{Replicas: int32(n), Template: b.userTemplate()}}
	defer func() { _ = b.deletePool(ctx, p) }()
	member, err := memoryOf(n, func() error {
		if err := b.c.Create(ctx, p); err != nil {
			return err
		}
		return b.waitPoolReady(ctx, p, int32(n))
	})
	if err != nil {
		return nil, err
	}
	r := row{
		Scenario:   title,
		Controller: fmt.Sprintf("%.1f MiB per member", member/(1<<20)),
		Baseline:   fmt.Sprintf("plain `docker run -d ... -v` %.1f MiB per container", container/(1<<20)),
		Ratio:      "-",
	}
	if container > 0 {
		r.Ratio = fmt.Sprintf("%.2fx", member/container)
	}
	return []row{r}, nil
}

// memoryOf is the fall of the host's MemAvailable, per object, while the n
// objects that make makes run, once settled.
func memoryOf(n int, make func() error) (float64, error) {
	before, err := settledMemAvailable()
	if err != nil {
		return 0, err
	}
	if err := make(); err != nil {
		return 0, err
	}
	after, err := settledMemAvailable()
	return float64(before-after) / float64(n), err
}

// settledMemAvailable is the host's MemAvailable once the objects just
// made or removed have settled.
func settledMemAvailable() (int64, error) {
	time.Sleep(3 * time.Second)
	return memAvailable()
}
