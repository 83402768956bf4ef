package controlplane

import (
	"context"
	"fmt"
	"maps"
	"runtime"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
)

// Nodes here are API objects only: no kubelet posts their status and no
// node lifecycle controller taints them, so RegisterNode and SetNodeReady
// write what those two would.

// defaultPods is the pods capacity of a registered node that names none, the
// kubelet's default --max-pods: without it the scheduler fits no Pod at all.
const defaultPods = "110"

// Reason and message of the Ready condition this package writes.
const (
	nodeReadyReason    = "LocalNodeReady"
	nodeReadyMessage   = "Registered by localcp: a Node object that no kubelet backs"
	nodeUnknownReason  = "NodeStatusUnknown"
	nodeUnknownMessage = "Marked not ready by localcp, as when a kubelet stops posting node status"
)

// RegisterNode registers (or registers again) the Node name: labels as a
// kubelet sets them (kubernetes.io/hostname, kubernetes.io/os,
// kubernetes.io/arch) and then the given labels (others it has are kept), capacity as both capacity
// and allocatable (pods 110 unless given), and Ready=True with a fresh
// heartbeat. The taints the API server adds to a new Node
// (node.kubernetes.io/not-ready) and SetNodeReady's are removed, as the node
// lifecycle controller would once the node is ready.
func RegisterNode(ctx context.Context, cfg *rest.Config, name string, capacity corev1.ResourceList, labels map[string]string) error {
	nodes, err := nodeClient(cfg)
	if err != nil {
		return err
	}
	if err := createNode(ctx, nodes, name); err != nil {
		return err
	}
	all := corev1.ResourceList{corev1.ResourcePods: resource.MustParse(defaultPods)}
	maps.Copy(all, capacity)
	if err := updateStatus(ctx, nodes, name, func(st *corev1.NodeStatus) {
		st.Capacity, st.Allocatable = all, all
		setReadyCondition(st, true)
	}); err != nil {
		return err
	}
	return update(ctx, nodes, name, func(n *corev1.Node) {
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		maps.Copy(n.Labels, kubeletLabels(name))
		maps.Copy(n.Labels, labels)
		n.Spec.Taints = lifecycleTaints(n.Spec.Taints, true)
	})
}

// SetNodeReady sets the Node's Ready condition (True, or Unknown as for a
// node whose kubelet went silent) with a fresh heartbeat, then its taints as
// the node lifecycle controller would: a node not ready gets
// node.kubernetes.io/unreachable with NoSchedule (no new Pods) and
// NoExecute (which would evict Pods that do not tolerate it, but no taint
// eviction controller runs here: bound Pods stay); a ready one loses them.
func SetNodeReady(ctx context.Context, cfg *rest.Config, name string, ready bool) error {
	nodes, err := nodeClient(cfg)
	if err != nil {
		return err
	}
	if err := updateStatus(ctx, nodes, name, func(st *corev1.NodeStatus) { setReadyCondition(st, ready) }); err != nil {
		return err
	}
	return update(ctx, nodes, name, func(n *corev1.Node) {
		n.Spec.Taints = lifecycleTaints(n.Spec.Taints, ready)
	})
}

func nodeClient(cfg *rest.Config) (typedcorev1.NodeInterface, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return cs.CoreV1().Nodes(), nil
}

// createNode creates an empty Node unless it exists: a control plane kept
// across restarts still has the nodes of its last run.
func createNode(ctx context.Context, nodes typedcorev1.NodeInterface, name string) error {
	_, err := nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create node %s: %w", name, err)
	}
	return nil
}

// update changes the Node's metadata and spec with change, again on a
// conflict.
func update(ctx context.Context, nodes typedcorev1.NodeInterface, name string, change func(*corev1.Node)) error {
	if err := retryUpdate(ctx, nodes, name, change, nodes.Update); err != nil {
		return fmt.Errorf("update node %s: %w", name, err)
	}
	return nil
}

// updateStatus changes the Node's status with change, through the status
// subresource (the only way a status is written), again on a conflict.
func updateStatus(ctx context.Context, nodes typedcorev1.NodeInterface, name string, change func(*corev1.NodeStatus)) error {
	err := retryUpdate(ctx, nodes, name, func(n *corev1.Node) { change(&n.Status) }, nodes.UpdateStatus)
	if err != nil {
		return fmt.Errorf("update status of node %s: %w", name, err)
	}
	return nil
}

// retryUpdate reads the Node, changes it and writes it with write, again
// on a conflict.
func retryUpdate(ctx context.Context, nodes typedcorev1.NodeInterface, name string, change func(*corev1.Node),
	write func(context.Context, *corev1.Node, metav1.UpdateOptions) (*corev1.Node, error),
) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := nodes.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(n)
		_, err = write(ctx, n, metav1.UpdateOptions{})
		return err
	})
}

// kubeletLabels are the well-known labels a kubelet gives its Node.
func kubeletLabels(name string) map[string]string {
	return map[string]string{
		corev1.LabelHostname:   name,
		corev1.LabelOSStable:   runtime.GOOS,
		corev1.LabelArchStable: runtime.GOARCH,
	}
}

// setReadyCondition sets Ready to True or Unknown with a heartbeat of now;
// its transition time changes only with its status.
func setReadyCondition(st *corev1.NodeStatus, ready bool) {
	now := metav1.Now()
	c := corev1.NodeCondition{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: nodeReadyReason, Message: nodeReadyMessage,
		LastHeartbeatTime: now, LastTransitionTime: now,
	}
	if !ready {
		c.Status, c.Reason, c.Message = corev1.ConditionUnknown, nodeUnknownReason, nodeUnknownMessage
	}
	i := slices.IndexFunc(st.Conditions, func(old corev1.NodeCondition) bool { return old.Type == corev1.NodeReady })
	if i < 0 {
		st.Conditions = append(st.Conditions, c)
		return
	}
	if st.Conditions[i].Status == c.Status {
		c.LastTransitionTime = st.Conditions[i].LastTransitionTime
	}
	st.Conditions[i] = c
}

// lifecycleTaints returns taints without those the node lifecycle controller
// owns (not-ready, unreachable), plus unreachable NoSchedule and NoExecute
// when the node is not ready. A taint kept keeps its time added.
func lifecycleTaints(taints []corev1.Taint, ready bool) []corev1.Taint {
	owned := func(t corev1.Taint) bool {
		return t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable
	}
	var out []corev1.Taint
	for _, t := range taints {
		if !owned(t) {
			out = append(out, t)
		}
	}
	if ready {
		return out
	}
	now := metav1.Now()
	for _, effect := range []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute} {
		t := corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: effect}
		if effect == corev1.TaintEffectNoExecute {
			t.TimeAdded = &now
		}
		if i := slices.IndexFunc(taints, func(old corev1.Taint) bool { return old.MatchTaint(&t) }); i >= 0 {
			t = taints[i]
		}
		out = append(out, t)
	}
	return out
}
