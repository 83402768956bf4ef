package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/hack/controlplane"
)

// placementNodes is the size of the larger set-up of the placement
// scenario; the smaller has one node.
const placementNodes = 3

// placement: N Tickets created at once in per-node mode (each placed by
// kube-scheduler through its placeholder Pod, then made by the manager of
// its node), until all Ready, then set Done until no labelled object is
// left: on 3 nodes with a manager each, against 1 node with its manager, in
// one run. It needs a control plane of its own: the bench's shared one has
// no scheduler and its manager is not per-node. Every node's manager uses
// this machine's engine, so the ratio shows what more managers and the
// scheduler's spreading cost or save, not more hardware.
func (b *bench) placement(ctx context.Context) (rows []row, err error) {
	n := b.cfg.PlacementTickets
	b.logf("%d Tickets at once in per-node mode, on 1 node and on %d", n, placementNodes)
	p, err := b.startPlacementPlane(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { err = joinErr(err, p.stop()) }()
	one, err := p.setUp(ctx, 1, n)
	if err != nil {
		return nil, fmt.Errorf("placement on 1 node: %w", err)
	}
	three, err := p.setUp(ctx, placementNodes, n)
	if err != nil {
		return nil, fmt.Errorf("placement on %d nodes: %w", placementNodes, err)
	}
	return placementRows(n, one, three), nil
}

// placementRows compares the larger set-up with the one-node one.
func placementRows(n int, one, many placementRun) []row {
	nodes := fmt.Sprintf("%d nodes", len(many.spread))
	spread := make([]string, len(many.spread))
	for i, c := range many.spread {
		spread[i] = fmt.Sprint(c)
	}
	return []row{
		{
			Scenario:   fmt.Sprintf("%d Tickets created at once in per-node mode, until all Ready", n),
			Controller: fmt.Sprintf("%s on %s (%s tickets)", seconds(many.ready), nodes, strings.Join(spread, "/")),
			Baseline:   "1 node " + seconds(one.ready),
			Ratio:      ratio(many.ready, one.ready),
		},
		{
			Scenario:   fmt.Sprintf("%d Tickets set Done in per-node mode, until no labelled object is left", n),
			Controller: fmt.Sprintf("%s on %s", seconds(many.cleaned), nodes),
			Baseline:   "1 node " + seconds(one.cleaned),
			Ratio:      ratio(many.cleaned, one.cleaned),
		},
	}
}

// placementPlane is the placement scenario's control plane with
// kube-scheduler, and the Nodes registered on it so far.
type placementPlane struct {
	// b is the bench against this control plane: its client and
	// namespace, and the shared engine, config and log.
	b     *bench
	dir   string
	cp    *controlplane.ControlPlane
	nodes []string
}

// placementRun is what one set-up measured: from the first create call to
// the last Ready as a watch saw it, from the first Done patch to the last
// destroy as the engine timed it, and the tickets placed on each node in
// the nodes' order.
type placementRun struct {
	ready, cleaned time.Duration
	spread         []int
}

// placementNode is the name of the i-th node (from 1) of the run, and the
// --instance of its manager: the bench's instance makes it unique per run.
func placementNode(instance string, i int) string { return fmt.Sprintf("%s-node-%d", instance, i) }

// startPlacementPlane starts the control plane (in a temporary folder) and
// kube-scheduler, and makes the bench's namespace on it.
func (b *bench) startPlacementPlane(ctx context.Context) (*placementPlane, error) {
	dir, err := os.MkdirTemp("", "afe-bench-placement-")
	if err != nil {
		return nil, err
	}
	b.logf("starting a control plane with kube-scheduler for per-node mode")
	cp, err := controlplane.Start(dir, b.cfg.Assets, b.cfg.CRDs)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	p := &placementPlane{dir: dir, cp: cp}
	if err := p.connect(ctx, b); err != nil {
		return nil, joinErr(err, p.stop())
	}
	return p, nil
}

// connect starts the scheduler and makes the plane's bench, with a client
// free of client-side rate limits (N Tickets are created at once), its
// namespace and the managers'.
func (p *placementPlane) connect(ctx context.Context, b *bench) error {
	if err := p.cp.StartScheduler(b.cfg.Assets); err != nil {
		return err
	}
	cfg := rest.CopyConfig(p.cp.Config)
	cfg.QPS, cfg.Burst = 1000, 1000
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		return err
	}
	p.b = &bench{cfg: b.cfg, log: b.log, c: c, engine: b.engine, instance: b.instance, ns: b.ns}
	if err := p.b.createNamespace(ctx); err != nil {
		return err
	}
	// The managers' namespace (the default --access-service's), where
	// per-node managers keep their placement key, as a cluster has it.
	return p.b.createNamespaceNamed(ctx, "afe-system")
}

// stop removes every Docker object of the nodes' managers, whatever
// happened, and stops the scheduler and the control plane.
func (p *placementPlane) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var errs []error
	if p.b != nil {
		for _, node := range p.nodes {
			errs = append(errs, removeLabelled(ctx, p.b.engine, map[string]string{afev1.LabelController: node}))
		}
	}
	errs = append(errs, p.cp.Stop(), os.RemoveAll(p.dir))
	return joinErr(errs...)
}

// setUp registers nodes up to k, starts a fresh per-node manager for each,
// warms them up and measures n Tickets; the managers are stopped at the
// end, once everything of the tickets is gone.
func (p *placementPlane) setUp(ctx context.Context, k, n int) (got placementRun, err error) {
	if err := p.registerNodes(ctx, k); err != nil {
		return got, err
	}
	nodes := p.nodes[:k]
	var managers []*exec.Cmd
	defer func() {
		for _, m := range managers {
			stopProcess(m)
		}
	}()
	for i, node := range nodes {
		m, err := p.startManager(node, fmt.Sprintf("%d-of-%d", i+1, k))
		if err != nil {
			return got, err
		}
		managers = append(managers, m)
	}
	if err := p.warmUp(ctx, nodes); err != nil {
		return got, err
	}
	got, err = p.measure(ctx, nodes, n)
	return got, joinErr(err, p.clear(ctx, nodes))
}

// registerNodes registers the run's nodes up to k, each with room for all
// the tickets.
func (p *placementPlane) registerNodes(ctx context.Context, k int) error {
	for i := len(p.nodes) + 1; i <= k; i++ {
		node := placementNode(p.b.instance, i)
		if err := controlplane.RegisterNode(ctx, p.cp.Config, node, nodeCapacity(p.b.cfg.PlacementTickets), nil); err != nil {
			return err
		}
		p.nodes = append(p.nodes, node)
	}
	return nil
}

// nodeCapacity is room for n+2 tickets of userCPU and userMemory: the
// one-node set-up places all n, and each ticket moves a node's score by
// about 100/(n+2) points, so that the scheduler spreads them. On a node of
// 64 CPUs half a CPU hardly moves the scheduler's integer scores, and it
// placed 3 tickets 2/1/0.
func nodeCapacity(n int) corev1.ResourceList {
	cpu, mem := resource.MustParse(userCPU), resource.MustParse(userMemory)
	cpu.Mul(int64(n + 2))
	mem.Mul(int64(n + 2))
	return corev1.ResourceList{
		corev1.ResourceCPU:    cpu,
		corev1.ResourceMemory: mem,
		corev1.ResourcePods:   resource.MustParse(fmt.Sprint(max(110, n+10))),
	}
}

// startManager runs the manager binary for the node as a DaemonSet's pod
// would, with the bench manager's reconcile settings, its log in the
// output folder as placement-<tag>.log, and the extra arguments. It serves
// no metrics or probes: the managers of a set-up would collide on fixed
// ports, and the warm-up tells when they work.
func (p *placementPlane) startManager(node, tag string, extra ...string) (*exec.Cmd, error) {
	logFile, err := os.Create(filepath.Join(p.b.cfg.Out, "placement-"+tag+".log"))
	if err != nil {
		return nil, err
	}
	defer func() { _ = logFile.Close() }() // the child has its own copy
	args := []string{
		"--per-node", "--instance", node,
		"--metrics-bind-address", "0",
		"--health-probe-bind-address", "0",
		"--max-concurrent-reconciles", fmt.Sprint(p.b.cfg.Concurrency),
		"--resync-period", p.b.cfg.Resync.String(),
		"--zap-time-encoding", "rfc3339nano",
		// Not the default folder under /tmp, which would outlive the run.
		"--run-log-dir", filepath.Join(p.dir, "run-logs-"+node),
	}
	args = append(args, extra...)
	cmd := exec.Command(p.b.cfg.Manager, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+p.cp.Kubeconfig)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	p.b.logf("starting %s %s", p.b.cfg.Manager, strings.Join(args, " "))
	return cmd, cmd.Start()
}

// warmUp makes one Ticket per node and removes them, so that the
// measurement does not include the managers' start and the scheduler
// learning of the nodes. The scheduler spreads them, most likely one on
// each node.
func (p *placementPlane) warmUp(ctx context.Context, nodes []string) error {
	names := make([]string, len(nodes))
	for i := range names {
		names[i] = fmt.Sprintf("warm-up-%d", i)
	}
	if _, _, err := p.b.createTicketsAtOnce(ctx, names, 2*time.Minute); err != nil {
		return fmt.Errorf("warm-up (the managers' logs are %s): %w", filepath.Join(p.b.cfg.Out, "placement-*.log"), err)
	}
	return p.clear(ctx, nodes)
}

// measure creates n Tickets at once until all are Ready, reads where they
// were placed, then sets them Done until no labelled object of the nodes'
// managers is left.
func (p *placementPlane) measure(ctx context.Context, nodes []string, n int) (placementRun, error) {
	p.b.logf("%d Tickets at once on %d node(s)", n, len(nodes))
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("placement-%d", i)
	}
	start, seen, err := p.b.createTicketsAtOnce(ctx, names, 10*time.Minute)
	if err != nil {
		return placementRun{}, err
	}
	got := placementRun{ready: latest(seen).Sub(start)}
	if got.spread, err = p.spread(ctx, names, nodes); err != nil {
		return got, err
	}

	p.b.logf("%d Tickets set Done on %d node(s)", n, len(nodes))
	gone := make([]*goneWatch, 0, len(nodes))
	defer func() {
		for _, g := range gone {
			g.cancel() // a second cancel is harmless
		}
	}()
	for _, node := range nodes {
		g, err := p.b.watchGone(ctx, map[string]string{afev1.LabelController: node, afev1.LabelNamespace: p.b.ns})
		if err != nil {
			return got, err
		}
		gone = append(gone, g)
	}
	start = time.Now()
	if err := p.b.setDone(ctx, names); err != nil {
		return got, err
	}
	last := start
	for _, g := range gone {
		t, err := g.wait(5 * time.Minute)
		if err != nil {
			return got, err
		}
		if t.After(last) {
			last = t
		}
	}
	got.cleaned = last.Sub(start)
	for _, node := range nodes {
		// And nothing else was left.
		if err := p.onNode(node).waitNoObjects(ctx, time.Minute); err != nil {
			return got, fmt.Errorf("node %s: %w", node, err)
		}
	}
	return got, nil
}

// spread counts the tickets on each node, from their status.node; a ticket
// Ready without a node of the set-up is an error.
func (p *placementPlane) spread(ctx context.Context, names, nodes []string) ([]int, error) {
	list := &afev1.TicketList{}
	if err := p.b.c.List(ctx, list, client.InNamespace(p.b.ns)); err != nil {
		return nil, err
	}
	node := map[string]string{}
	for _, tk := range list.Items {
		node[tk.Name] = tk.Status.Node
	}
	counts := make([]int, len(nodes))
	for _, name := range names {
		i := slices.Index(nodes, node[name])
		if i < 0 {
			return nil, fmt.Errorf("ticket %s is Ready on node %q, not one of %v", name, node[name], nodes)
		}
		counts[i]++
	}
	return counts, nil
}

// clear deletes every Ticket and Sandbox of the namespace and waits until
// the nodes' managers have removed their Docker objects, the tickets'
// finalizers and their placeholder Pods: the measurement then starts on
// empty nodes, and the next set-up's fresh managers with nothing to look
// at.
func (p *placementPlane) clear(ctx context.Context, nodes []string) error {
	for _, node := range nodes {
		if err := p.onNode(node).drain(ctx); err != nil {
			return fmt.Errorf("node %s: %w", node, err)
		}
	}
	return waitFor(ctx, time.Minute, func() error {
		tickets, pods := &afev1.TicketList{}, &corev1.PodList{}
		if err := p.b.c.List(ctx, tickets, client.InNamespace(p.b.ns)); err != nil {
			return err
		}
		if err := p.b.c.List(ctx, pods, client.InNamespace(p.b.ns)); err != nil {
			return err
		}
		if len(tickets.Items) > 0 || len(pods.Items) > 0 {
			return fmt.Errorf("%d Tickets and %d placeholder Pods left after the tickets' deletion", len(tickets.Items), len(pods.Items))
		}
		return nil
	})
}

// onNode is the plane's bench as the node's manager labels its Docker
// objects (the instance is the node), for the helpers that look at one
// instance's objects (drain, waitNoObjects).
func (p *placementPlane) onNode(node string) *bench {
	nb := *p.b
	nb.instance = node
	return &nb
}

// createTicketsAtOnce creates the Tickets of names (the user scenario's
// image and resources), eight create calls at a time, and returns when the
// first call was made and when a watch first saw each Ready.
func (b *bench) createTicketsAtOnce(ctx context.Context, names []string, timeout time.Duration) (time.Time, map[string]time.Time, error) {
	cpu, mem := resource.MustParse(userCPU), resource.MustParse(userMemory)
	w, err := b.watch(ctx, &afev1.TicketList{})
	if err != nil {
		return time.Time{}, nil, err
	}
	start := time.Now()
	if err := inParallel(len(names), 8, func(i int) error {
		return b.c.Create(ctx, &afev1.Ticket{
			ObjectMeta: metav1.ObjectMeta{Name: names[i], Namespace: b.ns},
			Spec: afev1.TicketSpec{Sandbox: afev1.SandboxTemplateSpec{Image: b.cfg.Image,
				Resources: afev1.SandboxResources{CPU: &cpu, Memory: &mem, Pids: userPids}}},
		})
	}); err != nil {
		w.w.Stop()
		return start, nil, err
	}
	seen, err := w.until(ctx, timeout, names, ticketReady)
	return start, seen, err
}

// setDone sets the Tickets' spec.state to Done, eight patches at a time.
func (b *bench) setDone(ctx context.Context, names []string) error {
	patch := []byte(`{"spec":{"state":"Done"}}`)
	return inParallel(len(names), 8, func(i int) error {
		return b.c.Patch(ctx, &afev1.Ticket{ObjectMeta: metav1.ObjectMeta{Name: names[i], Namespace: b.ns}},
			client.RawPatch(types.MergePatchType, patch))
	})
}
