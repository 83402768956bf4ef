package main

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// moveTicket: a ticket whose sandbox holds file in its workspace (the
// forward scenario's 100 MiB) is drained off its node (`kubectl drain`),
// until it is Ready on the other node with its workspace moved, against
// the docker CLI doing the same work: the container stopped, the volume's
// tar piped into a new volume, and a container run on it. Once each (a
// drain moves the node's every ticket).
func (p *placementPlane) moveTicket(ctx context.Context, file string) (row, error) {
	const name = "fwd-move"
	title := "Per-node mode: a ticket with a 100 MiB workspace moved off a drained node, `kubectl drain` to Ready on the next (1 rep)"
	tk := &afev1.Ticket{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.b.ns, Name: name},
		Spec: afev1.TicketSpec{Sandbox: afev1.SandboxTemplateSpec{Image: p.b.cfg.Image, Resources: afev1.SandboxResources{
			CPU: ptr.To(resource.MustParse(userCPU)), Memory: ptr.To(resource.MustParse(userMemory)), Pids: userPids}}},
	}
	if err := p.b.c.Create(ctx, tk); err != nil {
		return row{}, err
	}
	from := ""
	if err := waitFor(ctx, 2*time.Minute, func() error {
		if err := p.b.c.Get(ctx, types.NamespacedName{Namespace: p.b.ns, Name: name}, tk); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(tk.Status.Conditions, afev1.TicketReadyCondition) || tk.Status.Node == "" {
			return fmt.Errorf("ticket %s is not Ready yet", name)
		}
		from = tk.Status.Node
		return nil
	}); err != nil {
		return row{}, err
	}
	if err := waitFor(ctx, time.Minute, func() error { return p.plugin(ctx, "cp", file, name+":/workspace/big") }); err != nil {
		return row{}, err
	}
	kubectl := func(args ...string) error {
		out, err := exec.CommandContext(ctx, "kubectl", append([]string{"--kubeconfig", p.cp.Kubeconfig}, args...)...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	moved, err := timed(func() error {
		if err := kubectl("drain", from, "--ignore-daemonsets", "--timeout=2m"); err != nil {
			return err
		}
		return waitFor(ctx, 5*time.Minute, func() error {
			if err := p.b.c.Get(ctx, types.NamespacedName{Namespace: p.b.ns, Name: name}, tk); err != nil {
				return err
			}
			if !meta.IsStatusConditionTrue(tk.Status.Conditions, afev1.TicketReadyCondition) || tk.Status.Node == from || tk.Status.Moves != 1 {
				return fmt.Errorf("ticket %s has not moved off %s yet", name, from)
			}
			return nil
		})
	})
	if err := joinErr(err, kubectl("uncordon", from)); err != nil {
		return row{}, err
	}
	// The whole file arrived.
	if err := p.plugin(ctx, "exec", name, "--", "sh", "-c", fmt.Sprintf("test $(wc -c < /workspace/big) -eq %d", forwardFileBytes)); err != nil {
		return row{}, err
	}

	label := afev1.LabelController + "=" + p.b.cliInstance
	src, dst := fmt.Sprintf("afebench-%s-move-from", p.b.cliInstance), fmt.Sprintf("afebench-%s-move-to", p.b.cliInstance)
	defer p.b.removePlain([]string{src, dst})
	if err := dockerCLI(ctx, nil, plainRunArgs(src, p.b.cfg.Image, label)...); err != nil {
		return row{}, err
	}
	if err := dockerCLI(ctx, nil, "cp", file, src+":/workspace/big"); err != nil {
		return row{}, err
	}
	plain, err := timed(func() error {
		if err := dockerCLI(ctx, nil, "stop", "-t", "1", src); err != nil {
			return err
		}
		pipe := fmt.Sprintf("docker run --rm --label %s --network none -v %s-ws:/w:ro %s tar -C /w -cf - . | docker run --rm -i --label %s --network none -v %s-ws:/w %s tar -C /w -xf -",
			label, src, p.b.cfg.Image, label, dst, p.b.cfg.Image)
		if out, err := exec.CommandContext(ctx, "sh", "-c", pipe).CombinedOutput(); err != nil {
			return fmt.Errorf("the volume's tar: %w: %s", err, strings.TrimSpace(string(out)))
		}
		return dockerCLI(ctx, nil, plainRunArgs(dst, p.b.cfg.Image, label)...)
	})
	if err != nil {
		return row{}, err
	}
	return timing(title, sample{moved}, sample{plain}, "docker CLI (stop, the volume's tar into a new volume, docker run)"), nil
}
