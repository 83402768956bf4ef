package pool

import (
	"fmt"
	"slices"
	"strings"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/controllers/writes"
	"afe.dev/sandbox/internal/metrics"
)

// tally is what the pool's status says of its members: those of this
// engine, or in per-node mode those of every node that reported, this
// node's own entry written first.
type tally struct {
	replicas, ready, want int
	// short are the nodes with fewer ready members than wanted (per-node
	// mode only), sorted.
	short []string
}

// tallyOf writes this engine's counts into the pool's status, under node
// in per-node mode (node empty: one engine), and sums what the status
// holds.
func tallyOf(st *afev1.SandboxPoolStatus, node string, replicas, ready, want int) tally {
	if node == "" {
		st.Nodes = nil
		return tally{replicas: replicas, ready: ready, want: want}
	}
	entry := afev1.SandboxPoolNodeStatus{Node: node, Replicas: int32(replicas), ReadyReplicas: int32(ready)}
	i := slices.IndexFunc(st.Nodes, func(n afev1.SandboxPoolNodeStatus) bool { return n.Node == node })
	if i < 0 {
		st.Nodes = append(st.Nodes, entry)
		slices.SortFunc(st.Nodes, func(a, b afev1.SandboxPoolNodeStatus) int { return strings.Compare(a.Node, b.Node) })
	} else {
		st.Nodes[i] = entry
	}
	var t tally
	for _, n := range st.Nodes {
		t.replicas += int(n.Replicas)
		t.ready += int(n.ReadyReplicas)
		t.want += want
		if int(n.ReadyReplicas) < want {
			t.short = append(t.short, n.Node)
		}
	}
	return t
}

// setReady writes the pool's counts and its Ready condition from what the
// reconcile found: ready once it keeps the members it wants (on every node
// in per-node mode); else filling, with the last creation's error when
// this engine's failed.
func setReady(s *poolScope, node string, creating, maxReplicas int, failed error) {
	p := s.pool
	ready := len(s.members.ready)
	t := tallyOf(&p.Status, node, ready+creating, ready, s.want)
	p.Status.Replicas = int32(t.replicas)
	p.Status.ReadyReplicas = int32(t.ready)
	p.Status.Ready = fmt.Sprintf("%d/%d", t.ready, t.want)
	metrics.SetPoolMembers(p.Namespace, p.Name, ready, creating)
	where := ""
	if len(t.short) > 0 {
		where = " (short on " + strings.Join(t.short, ", ") + ")"
	}
	switch {
	case failed != nil && ready < s.want:
		on := ""
		if node != "" {
			on = " on " + node
		}
		writes.SetCondition(p, afev1.SandboxPoolReadyCondition, false, afev1.PoolMemberFailedReason,
			fmt.Sprintf("%d of %d members ready%s; the last one%s could not be made: %v", t.ready, t.want, where, on, failed))
	case t.ready < t.want:
		writes.SetCondition(p, afev1.SandboxPoolReadyCondition, false, afev1.PoolFillingReason,
			fmt.Sprintf("%d of %d members ready%s; more are being made", t.ready, t.want, where))
	case int(p.Spec.Replicas) > maxReplicas:
		writes.SetCondition(p, afev1.SandboxPoolReadyCondition, true, afev1.PoolReplicasBoundedReason,
			fmt.Sprintf("%d members ready: the controller's --max-pool-replicas, below spec.replicas %d", t.ready, p.Spec.Replicas))
	default:
		writes.SetCondition(p, afev1.SandboxPoolReadyCondition, true, afev1.ReadyReason,
			fmt.Sprintf("%d members ready", t.ready))
	}
}
