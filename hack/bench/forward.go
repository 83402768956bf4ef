package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"afe.dev/sandbox/access"
	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// forwardFileBytes is the size of the file the forward scenario copies.
const forwardFileBytes = 100 << 20

// forward: in per-node mode, a ticket with a 100 MiB workspace moved off a
// drained node (moveTicket), then `kubectl afe exec -- true` and a 100 MiB
// `kubectl afe cp` into the sandbox of a ticket on another node than the
// manager the APIService reaches (which forwards them to that node's
// manager over mutually authenticated TLS), against the same into a
// ticket on the receiving manager's own node, in one run. Both nodes'
// managers use this machine's engine: the ratio is what a forward costs.
func (b *bench) forward(ctx context.Context) (rows []row, err error) {
	b.logf("kubectl afe exec and cp in per-node mode, forwarded to another node's manager against served locally")
	p, err := b.startPlacementPlane(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { err = joinErr(err, p.stop()) }()
	stop, err := p.startAccessManagers(ctx)
	defer stop()
	if err != nil {
		return nil, err
	}
	file, err := randomFile(p.dir, forwardFileBytes)
	if err != nil {
		return nil, err
	}
	// First, while no other ticket is on the node it drains.
	moveRow, err := p.moveTicket(ctx, file)
	if err != nil {
		return nil, err
	}
	local, remote := "fwd-local", "fwd-remote"
	if err := p.ticketsOn(ctx, map[string]string{local: p.nodes[0], remote: p.nodes[1]}); err != nil {
		return nil, err
	}
	defer func() { err = joinErr(err, p.clear(ctx, p.nodes)) }()
	afe := func(args ...string) func() error {
		return func() error { return p.plugin(ctx, args...) }
	}
	// Once unmeasured each: the APIService's discovery, the first TLS
	// sessions (the forward's included).
	for _, t := range []string{local, remote} {
		if err := waitFor(ctx, time.Minute, afe("exec", t, "--", "true")); err != nil {
			return nil, err
		}
	}
	execRow, err := alternate(b.cfg.RunReps, afe("exec", remote, "--", "true"), afe("exec", local, "--", "true"))
	if err != nil {
		return nil, err
	}
	cpRow, err := alternate(5, afe("cp", file, remote+":/workspace/big"), afe("cp", file, local+":/workspace/big"))
	if err != nil {
		return nil, err
	}
	return []row{
		timing(fmt.Sprintf("Per-node mode: `kubectl afe exec SANDBOX -- true` forwarded to the sandbox's node's manager (%d reps)", b.cfg.RunReps),
			execRow[0], execRow[1], "served by the receiving manager"),
		timing("Per-node mode: `kubectl afe cp` of a 100 MiB file into a sandbox, forwarded (5 reps)",
			cpRow[0], cpRow[1], "served by the receiving manager"),
		moveRow,
	}, nil
}

// alternate times a and b n times each, one after the other, so that a
// change of the machine's load falls on both.
func alternate(n int, a, b func() error) ([2]sample, error) {
	var out [2]sample
	for range n {
		for i, f := range []func() error{a, b} {
			d, err := timed(f)
			if err != nil {
				return out, err
			}
			out[i] = append(out[i], d)
		}
	}
	return out, nil
}

// randomFile writes n random bytes (nothing on the way compresses them).
func randomFile(dir string, n int) (string, error) {
	path := filepath.Join(dir, "random")
	buf := make([]byte, n)
	if _, err := rand.Read(buf); err != nil {
		return "", err
	}
	return path, os.WriteFile(path, buf, 0o600)
}

// startAccessManagers registers two nodes and runs a manager for each, as
// config/per-node does: each serves the access API and the other managers;
// the first registers the APIService (an ExternalName Service to its
// loopback port, as make run NODES=3 does). It returns once the APIService
// is available.
func (p *placementPlane) startAccessManagers(ctx context.Context) (func(), error) {
	if err := p.registerNodes(ctx, 2); err != nil {
		return func() {}, err
	}
	common := []string{"--access-service", "afe-system/afe-access", "--peer-bind-address", "127.0.0.1:0"}
	var managers []*exec.Cmd
	stop := func() {
		for _, m := range managers {
			stopProcess(m)
		}
	}
	for i, extra := range [][]string{
		{"--access-bind-address", "127.0.0.1:0", "--access-register", "--access-external-name", "localhost"},
		{"--access-bind-address", "127.0.0.1:0"},
	} {
		m, err := p.startManager(p.nodes[i], fmt.Sprintf("forward-%d", i+1), append(common, extra...)...)
		if err != nil {
			return stop, err
		}
		managers = append(managers, m)
	}
	return stop, waitFor(ctx, 2*time.Minute, func() error {
		as := &unstructured.Unstructured{}
		as.SetAPIVersion("apiregistration.k8s.io/v1")
		as.SetKind("APIService")
		if err := p.b.c.Get(ctx, types.NamespacedName{Name: access.APIServiceName}, as); err != nil {
			return err
		}
		conds, _, _ := unstructured.NestedSlice(as.Object, "status", "conditions")
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok && m["type"] == "Available" && m["status"] == "True" {
				return nil
			}
		}
		return fmt.Errorf("the APIService %s is not available", access.APIServiceName)
	})
}

// ticketsOn creates a Ticket per name, placed on its node by a
// nodeSelector, and waits until each is Ready there.
func (p *placementPlane) ticketsOn(ctx context.Context, on map[string]string) error {
	for name, node := range on {
		tk := &afev1.Ticket{
			ObjectMeta: metav1.ObjectMeta{Namespace: p.b.ns, Name: name},
			Spec: afev1.TicketSpec{
				// The user scenario's resources: the nodes have room for
				// a few tickets of them (nodeCapacity), not of the defaults.
				Sandbox: afev1.SandboxTemplateSpec{Image: p.b.cfg.Image, Resources: afev1.SandboxResources{
					CPU: ptr.To(resource.MustParse(userCPU)), Memory: ptr.To(resource.MustParse(userMemory)), Pids: userPids}},
				Placement: &afev1.TicketPlacement{NodeSelector: map[string]string{corev1.LabelHostname: node}},
			},
		}
		if err := p.b.c.Create(ctx, tk); err != nil {
			return err
		}
	}
	return waitFor(ctx, 2*time.Minute, func() error {
		for name, node := range on {
			tk := &afev1.Ticket{}
			if err := p.b.c.Get(ctx, types.NamespacedName{Namespace: p.b.ns, Name: name}, tk); err != nil {
				return err
			}
			if !meta.IsStatusConditionTrue(tk.Status.Conditions, afev1.TicketReadyCondition) || tk.Status.Node != node {
				return fmt.Errorf("ticket %s is not Ready on %s yet", name, node)
			}
		}
		return nil
	})
}

// plugin runs kubectl afe against the plane as its admin.
func (p *placementPlane) plugin(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, p.b.cfg.Plugin, append([]string{"--kubeconfig", p.cp.Kubeconfig, "-n", p.b.ns}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("kubectl afe %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
