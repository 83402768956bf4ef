package controlplane

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// kube-scheduler binds Pods to the registered nodes by their capacity,
// reports a Pod that fits nowhere as unschedulable, and keeps new Pods off a
// node marked not ready until it is ready again; Stop ends it.
func TestSchedulerPlacesPodsOnRegisteredNodes(t *testing.T) {
	assets := assets(t)
	if _, err := os.Stat(filepath.Join(assets, "kube-scheduler")); err != nil {
		t.Skipf("no kube-scheduler in %s (make envtest)", assets)
	}
	ctx := context.Background()
	cp, err := Start(t.TempDir(), assets)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	if err := cp.StartScheduler(assets); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cp.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cpu2 := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
	for _, name := range []string{"node-a", "node-b"} {
		if err := RegisterNode(ctx, cp.Config, name, cpu2, map[string]string{"zone": "local"}); err != nil {
			t.Fatal(err)
		}
	}
	node := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: "node-a"}, node); err != nil {
		t.Fatal(err)
	}
	if node.Labels[corev1.LabelHostname] != "node-a" || node.Labels["zone"] != "local" || len(node.Spec.Taints) != 0 {
		t.Fatalf("registered node: labels %v, taints %v", node.Labels, node.Spec.Taints)
	}

	// Two Pods of 1500m fill both nodes, one each; a third fits nowhere.
	first, second := createPod(ctx, t, c, "big-1", "1500m", nil), createPod(ctx, t, c, "big-2", "1500m", nil)
	a, b := boundNode(ctx, t, c, first), boundNode(ctx, t, c, second)
	if a == b {
		t.Fatalf("both Pods of 1500m are on %s, which has 2 CPUs", a)
	}
	third := createPod(ctx, t, c, "big-3", "1500m", nil)
	if msg := unschedulable(ctx, t, c, third); !strings.Contains(msg, "Insufficient cpu") {
		t.Fatalf("the third Pod is unschedulable with %q, want Insufficient cpu", msg)
	}

	// node-a not ready: a Pod that may go only there waits, any other Pod
	// goes to node-b; node-a ready again takes the waiting one.
	if err := SetNodeReady(ctx, cp.Config, "node-a", false); err != nil {
		t.Fatal(err)
	}
	// kube-scheduler learns of the taint through its watch of Nodes, which
	// may come after its watch of Pods brought the new Pod: one it bound to
	// node-a meanwhile is made again, under another name.
	var onA *corev1.Pod
	for attempt := 0; ; attempt++ {
		onA = createPod(ctx, t, c, "on-a-"+strconv.Itoa(attempt), "100m", map[string]string{corev1.LabelHostname: "node-a"})
		node, msg := settled(ctx, t, c, onA)
		if node == "" {
			if !strings.Contains(msg, "untolerated taint") {
				t.Fatalf("the Pod for the node not ready is unschedulable with %q, want an untolerated taint", msg)
			}
			break
		}
		if attempt == 4 {
			t.Fatalf("a Pod for the node not ready was bound to %s, 5 times", node)
		}
		if err := c.Delete(ctx, onA, client.GracePeriodSeconds(0)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		if got := boundNode(ctx, t, c, createPod(ctx, t, c, "small-"+strconv.Itoa(i), "100m", nil)); got != "node-b" {
			t.Fatalf("a new Pod is bound to %s, which is not ready", got)
		}
	}
	if err := SetNodeReady(ctx, cp.Config, "node-a", true); err != nil {
		t.Fatal(err)
	}
	if got := boundNode(ctx, t, c, onA); got != "node-a" {
		t.Fatalf("the waiting Pod is bound to %s, want node-a", got)
	}

	pid := cp.scheduler.cmd.Process.Pid
	if err := cp.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
		t.Fatalf("kube-scheduler (pid %d) still runs after Stop", pid)
	}
	// Its own user may do all it needs: no request was refused.
	log, err := os.ReadFile(filepath.Join(cp.Dir, "kube-scheduler.log"))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(log)) {
		if strings.Contains(line, "forbidden") {
			t.Fatalf("kube-scheduler was refused a request: %s", line)
		}
	}
}

// SetNodeReady writes the Ready condition and the unreachable taints as the
// node lifecycle controller would, and undoes them.
func TestSetNodeReady(t *testing.T) {
	ctx := context.Background()
	cp, err := Start(t.TempDir(), assets(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	c, err := client.New(cp.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := RegisterNode(ctx, cp.Config, "n", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}, nil); err != nil {
		t.Fatal(err)
	}
	get := func() *corev1.Node {
		n := &corev1.Node{}
		if err := c.Get(ctx, client.ObjectKey{Name: "n"}, n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	n := get()
	if got := n.Status.Allocatable[corev1.ResourcePods]; got.String() != "110" {
		t.Fatalf("allocatable pods %s, want the default 110", got.String())
	}
	assertReady(t, n, corev1.ConditionTrue, 0)

	if err := SetNodeReady(ctx, cp.Config, "n", false); err != nil {
		t.Fatal(err)
	}
	assertReady(t, get(), corev1.ConditionUnknown, 2)
	// Again not ready: the same two taints, not four.
	if err := SetNodeReady(ctx, cp.Config, "n", false); err != nil {
		t.Fatal(err)
	}
	assertReady(t, get(), corev1.ConditionUnknown, 2)

	// Registering again (a restart of make run) makes it ready.
	if err := RegisterNode(ctx, cp.Config, "n", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}, nil); err != nil {
		t.Fatal(err)
	}
	assertReady(t, get(), corev1.ConditionTrue, 0)
}

func assertReady(t *testing.T, n *corev1.Node, want corev1.ConditionStatus, unreachableTaints int) {
	t.Helper()
	var ready *corev1.NodeCondition
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			ready = &n.Status.Conditions[i]
		}
	}
	if ready == nil || ready.Status != want || time.Since(ready.LastHeartbeatTime.Time) > time.Minute {
		t.Fatalf("Ready condition %+v, want status %s with a fresh heartbeat", ready, want)
	}
	var taints []corev1.Taint
	for _, taint := range n.Spec.Taints {
		if taint.Key == corev1.TaintNodeUnreachable {
			taints = append(taints, taint)
		}
	}
	if len(taints) != unreachableTaints || len(taints) != len(n.Spec.Taints) {
		t.Fatalf("taints %v, want %d of %s only", n.Spec.Taints, unreachableTaints, corev1.TaintNodeUnreachable)
	}
}

// createPod creates a Pod in default requesting cpu, which no kubelet will
// ever run.
func createPod(ctx context.Context, t *testing.T, c client.Client, name, cpu string, nodeSelector map[string]string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: corev1.PodSpec{
			NodeSelector: nodeSelector,
			Containers: []corev1.Container{{
				Name: "c", Image: "x",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}},
			}},
		},
	}
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	return pod
}

// boundNode waits for the Pod to be bound and returns its node.
func boundNode(ctx context.Context, t *testing.T, c client.Client, pod *corev1.Pod) string {
	t.Helper()
	var node string
	waitFor(ctx, t, c, pod, "bound", func(p *corev1.Pod) bool {
		node = p.Spec.NodeName
		return node != ""
	})
	return node
}

// settled waits for the Pod to be bound or unschedulable: its node, or
// the PodScheduled=False condition's message.
func settled(ctx context.Context, t *testing.T, c client.Client, pod *corev1.Pod) (node, msg string) {
	t.Helper()
	waitFor(ctx, t, c, pod, "bound or unschedulable", func(p *corev1.Pod) bool {
		node, msg = p.Spec.NodeName, ""
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse {
				msg = cond.Message
			}
		}
		return node != "" || msg != ""
	})
	return node, msg
}

// unschedulable waits for the Pod's PodScheduled=False condition and returns
// its message; the Pod is not bound.
func unschedulable(ctx context.Context, t *testing.T, c client.Client, pod *corev1.Pod) string {
	t.Helper()
	var msg string
	waitFor(ctx, t, c, pod, "unschedulable", func(p *corev1.Pod) bool {
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse {
				msg = cond.Message
				return p.Spec.NodeName == ""
			}
		}
		return false
	})
	return msg
}

func waitFor(ctx context.Context, t *testing.T, c client.Client, pod *corev1.Pod, what string, done func(*corev1.Pod) bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got := &corev1.Pod{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(pod), got); err != nil {
			return false, err
		}
		return done(got), nil
	})
	if err != nil {
		t.Fatalf("Pod %s not %s: %v", pod.Name, what, err)
	}
}

// A kube-scheduler that ends at start is an error that shows its last log
// lines.
func TestStartSchedulerReportsAnEarlyExit(t *testing.T) {
	cp, err := Start(t.TempDir(), assets(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	fake := t.TempDir()
	script := "#!/bin/sh\necho \"E0101 unknown flag $1\" >&2\nexit 1\n"
	if err := os.WriteFile(filepath.Join(fake, "kube-scheduler"), []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	err = cp.StartScheduler(fake)
	if err == nil || !strings.Contains(err.Error(), "E0101 unknown flag --config=") {
		t.Fatalf("StartScheduler = %v, want the scheduler's last words", err)
	}
	if cp.scheduler != nil {
		t.Fatal("a scheduler that ended is kept")
	}
}
