package sandbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/controllers/writes"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/naming"
	"afe.dev/sandbox/internal/placement"
	"afe.dev/sandbox/internal/tarbound"
	"afe.dev/sandbox/move"
)

// A ticket whose node is lost (per-node mode, NodeLost) is placed anew and
// its Sandboxes are made afresh, with new UIDs: their workspaces were on
// the lost engine. A snapshot the ticket kept (a Snapshot Run's volume,
// labelled with the ticket's UID) may still be on a reachable engine: this
// one, or another node's, which the ticket left before (a drain) or whose
// manager still answers though its node is NotReady. The manager of the
// node the ticket is placed on now asks every running manager for the
// ticket's snapshots of the sandbox's name and fills the new workspace
// with the newest, before the container first runs. Each manager answers
// only for its own instance's volumes of that namespace, sandbox name and
// Ticket UID, and only to the manager of the node the ticket's placeholder
// is bound to (the move package). The ticket's status says the placement
// was lost; a forged one only has a sandbox start from its own ticket's
// newest snapshot.

// snapshotsPatience is how long after its creation a sandbox made after its
// node was lost waits for every running manager to say which snapshots of
// its ticket it keeps.
const snapshotsPatience = 30 * time.Second

// madeAfterNodeLost is true for a sandbox made by its Ticket after the
// ticket's placement was lost (its last requeue is NodeLost, at or before
// the Sandbox's creation), whose container never ran and whose workspace
// is not restored yet. Its status.containerID and WorkspaceReady are the
// tenant's to write: a forged one only keeps its own sandbox from its own
// ticket's snapshot, or has a sandbox whose container is not found by its
// derived name (afterNodeLost) start from that snapshot again.
func madeAfterNodeLost(sbx *afev1.Sandbox, tk *afev1.Ticket) bool {
	if tk == nil || tk.Status.LastRequeueReason != afev1.NodeLostReason || tk.Status.LastRequeueTime == nil ||
		sbx.CreationTimestamp.Before(tk.Status.LastRequeueTime) || sbx.Status.ContainerID != "" ||
		sbx.Spec.Workspace.Type == afev1.WorkspaceFolder {
		return false
	}
	c := meta.FindStatusCondition(sbx.Status.Conditions, afev1.WorkspaceReadyCondition)
	return c == nil || c.Status != metav1.ConditionTrue || c.Reason != afev1.RestoredFromSnapshotReason
}

// afterNodeLost is the UID of the Ticket of this manager's sandbox when
// madeAfterNodeLost holds (in per-node mode with the managers' channel up)
// and no container of the sandbox exists; empty otherwise.
func (r *Reconciler) afterNodeLost(ctx context.Context, s *sandboxScope) (types.UID, error) {
	if !r.Config.PerNode || r.Config.Moves == nil {
		return "", nil
	}
	tk, _, err := placement.TicketOf(ctx, r.Client, s.sbx)
	if err != nil || !madeAfterNodeLost(s.sbx, tk) {
		return "", err
	}
	_, err = r.Engine.InspectContainer(ctx, s.containerName())
	if errors.Is(err, docker.ErrNotFound) {
		return tk.UID, nil
	}
	return "", err
}

// restoreAfterNodeLost fills the workspace volume of a sandbox made after
// its ticket's node was lost with the newest snapshot of the ticket on a
// reachable engine. It returns the volume filled, or nil when no engine
// that answers keeps one (the workspace starts empty, as before), or a
// result that ends the phase.
func (r *Reconciler) restoreAfterNodeLost(ctx context.Context, s *sandboxScope, ticketUID types.UID) (*docker.Volume, string, ctrl.Result, error) {
	log := logf.FromContext(ctx)
	snap, ok, res, err := r.newestReachableSnapshot(ctx, s, ticketUID)
	if !ok || err != nil || !res.IsZero() {
		return nil, "", res, err
	}
	// What an attempt cut short wrote is no workspace: made again.
	if err := r.removeOwnedVolume(ctx, s); err != nil {
		return nil, "", ctrl.Result{}, err
	}
	v, err := r.ensureWorkspaceVolume(ctx, s)
	if err != nil {
		return nil, "", ctrl.Result{}, err
	}
	if v == nil {
		res, err := s.notAdopted(afev1.WorkspaceReadyCondition, "Volume", naming.Volume(s.id.Key))
		return nil, "", res, err
	}
	if err := r.ensureImage(ctx, s, afev1.ContainerReadyCondition, "Image", s.sbx.Spec.Image); err != nil {
		return nil, "", ctrl.Result{}, err
	}
	var n int64
	if snap.Node == r.Config.Instance {
		n, err = r.copyLocalSnapshot(ctx, s, snap.Volume, v.Name)
	} else {
		n, err = r.fetchSnapshot(ctx, s, snap, v.Name)
	}
	if errors.Is(err, tarbound.ErrTooLarge) || errors.Is(err, tarbound.ErrSparse) {
		// A snapshot past the bound of its copy is not restored: the
		// workspace starts empty.
		log.Info("The ticket's newest snapshot holds more than its copy's bound; the workspace starts empty", "snapshot", snap.Volume, "node", snap.Node)
		r.Recorder.Eventf(s.sbx, nil, corev1.EventTypeWarning, afev1.SnapshotTooLargeReason, "Restore",
			"Snapshot %s on node %s holds more than %s; the workspace starts empty", snap.Volume, snap.Node, r.Config.CopyBound(s.sbx))
		if err := r.removeOwnedVolume(ctx, s); err != nil {
			return nil, "", ctrl.Result{}, err
		}
		v, err := r.ensureWorkspaceVolume(ctx, s)
		return v, "", ctrl.Result{}, err
	}
	if err != nil {
		writes.SetCondition(s.sbx, afev1.WorkspaceReadyCondition, false, afev1.NodeLostReason,
			fmt.Sprintf("Restoring snapshot %s of node %s, the ticket's newest after its node was lost: %v", snap.Volume, snap.Node, err))
		return nil, "", ctrl.Result{}, errors.Join(err, r.removeOwnedVolume(ctx, s))
	}
	from := fmt.Sprintf("snapshot %s of node %s", snap.Volume, snap.Node)
	log.Info("Restored the workspace of a ticket whose node was lost", "snapshot", snap.Volume, "node", snap.Node, "bytes", n)
	r.Recorder.Eventf(s.sbx, nil, corev1.EventTypeNormal, "Restored", "Restore",
		"Workspace volume %s filled from %s, the ticket's newest after its node was lost", v.Name, from)
	return v, from, ctrl.Result{}, nil
}

// newestReachableSnapshot is the newest snapshot of the ticket under the
// sandbox's name on this engine or on the engine of a manager that
// answers; false when there is none, or a result while a running manager
// has not answered yet.
func (r *Reconciler) newestReachableSnapshot(ctx context.Context, s *sandboxScope, ticketUID types.UID) (move.PeerSnapshot, bool, ctrl.Result, error) {
	found, unanswered := r.Config.Moves.Snapshots(ctx, s.sbx)
	if unanswered != nil {
		// A running manager that has not answered yet (its cache not
		// showing the new placement, say) may keep the newest: asked
		// again for a while, then done without it.
		if time.Since(s.sbx.CreationTimestamp.Time) < snapshotsPatience {
			writes.SetCondition(s.sbx, afev1.WorkspaceReadyCondition, false, afev1.NodeLostReason,
				"Asking the managers of the other nodes for the ticket's snapshots: "+unanswered.Error())
			return move.PeerSnapshot{}, false, ctrl.Result{RequeueAfter: moveRetry}, nil
		}
		logf.FromContext(ctx).Info("Some managers did not say which snapshots of the ticket they keep", "error", unanswered.Error())
		r.Recorder.Eventf(s.sbx, nil, corev1.EventTypeWarning, afev1.NodeLostReason, "Restore",
			"Restoring from the snapshots the other managers named; some did not answer: %v", unanswered)
	}
	local, err := r.Engine.ListVolumes(ctx, map[string]string{
		afev1.LabelController: s.id.Instance,
		afev1.LabelRole:       afev1.RoleSnapshot,
		afev1.LabelNamespace:  s.id.Namespace,
		afev1.LabelSandbox:    s.id.Name,
		afev1.LabelTicketUID:  string(ticketUID),
	})
	if err != nil {
		return move.PeerSnapshot{}, false, ctrl.Result{}, err
	}
	for _, v := range local {
		found = append(found, move.PeerSnapshot{Node: r.Config.Instance, Volume: v.Name, Created: v.Created})
	}
	snap, ok := move.NewestSnapshot(found)
	return snap, ok, ctrl.Result{}, nil
}

// copyLocalSnapshot copies a snapshot volume of this engine into the
// workspace volume, its files made the sandbox's user's.
func (r *Reconciler) copyLocalSnapshot(ctx context.Context, s *sandboxScope, snapshot, volume string) (int64, error) {
	owners, err := r.restoredOwners(ctx, s, snapshot)
	if err != nil {
		return 0, err
	}
	return r.Engine.CopyWorkspace(ctx, docker.CopySpec{
		Name:     naming.Restore(s.id.Key),
		Image:    s.sbx.Spec.Image,
		Labels:   s.id.Labels(afev1.RoleSnapshotCopy),
		From:     docker.Mount{Type: docker.MountVolume, Source: snapshot},
		To:       docker.Mount{Type: docker.MountVolume, Source: volume},
		MaxBytes: r.Config.CopyBytes(s.sbx),
		Owners:   owners,
	})
}

// fetchSnapshot fills the workspace volume with a snapshot another node's
// manager sends, and verifies that it arrived whole.
func (r *Reconciler) fetchSnapshot(ctx context.Context, s *sandboxScope, snap move.PeerSnapshot, volume string) (int64, error) {
	tree, err := r.Config.Moves.Snapshot(ctx, snap.Node, s.sbx, snap.Volume)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tree.Tree.Close() }()
	owners, err := r.movedOwners(s, tree.User)
	if err != nil {
		return 0, err
	}
	n, err := r.Engine.FillWorkspace(ctx, docker.FillSpec{
		Name:     naming.Restore(s.id.Key) + "-in",
		Labels:   s.id.Labels(afev1.RoleSnapshotCopy),
		To:       docker.Mount{Type: docker.MountVolume, Source: volume},
		Tree:     tree.Tree,
		MaxBytes: r.Config.CopyBytes(s.sbx),
		Owners:   owners,
	})
	if err == nil {
		err = tree.Verify()
	}
	return n, err
}
