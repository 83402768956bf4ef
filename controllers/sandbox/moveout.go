package sandbox

import (
	"context"
	"errors"

	"k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/controllers/identity"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/naming"
	"afe.dev/sandbox/internal/placement"
)

// moveOut removes, on the node a sandbox's ticket left, what it ran there,
// once the manager of the node it is placed on now says it holds the
// sandbox (its workspace arrived whole there, or its container runs). It
// looks again every moveRetry while this engine holds anything of it.
func (r *Reconciler) moveOut(ctx context.Context, s *sandboxScope) (ctrl.Result, error) {
	if r.Config.Moves == nil || !s.sbx.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	if held, err := r.holdsAny(ctx, s); err != nil || !held {
		return ctrl.Result{}, err
	}
	placed, err := placement.PlacedNode(ctx, r.Client, r.Config.PlacementKey, s.sbx)
	if err != nil {
		return ctrl.Result{}, err
	}
	if placed == "" || placed == r.Config.Instance {
		return ctrl.Result{RequeueAfter: moveRetry}, nil // being placed
	}
	// A move here that had not settled attests nothing now: the node it
	// came from asks the node the sandbox is placed on. Its record and
	// staging volume go at once; on an engine the nodes share they would
	// stand in the way of the move there (moveRecord).
	if err := r.removeMoveVolumes(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	log := logf.FromContext(ctx).WithValues("node", placed)
	holds, err := r.Config.Moves.Holds(ctx, placed, s.sbx)
	if err != nil || !holds {
		log.V(1).Info("The sandbox moved away is not held there yet", "error", err)
		return ctrl.Result{RequeueAfter: moveRetry}, nil
	}
	if err := r.removeObjects(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	r.forget(s.sbx.UID)
	log.Info("Removed the objects of a sandbox that moved to another node")
	return ctrl.Result{}, nil
}

// holdsAny is true when this engine has the sandbox's container (its own,
// or a pool member renamed to its name), its workspace volume, its claim
// record, or the staging volume or record of a move here: each is checked
// as the sandbox's again before it is removed.
// Its ticket's snapshots stay with the ticket.
func (r *Reconciler) holdsAny(ctx context.Context, s *sandboxScope) (bool, error) {
	ct, err := r.Engine.InspectContainer(ctx, s.containerName())
	if err == nil && (s.id.Owns(ct.Labels) || ct.Labels[afev1.LabelRole] == afev1.RoleMember) {
		return true, nil
	}
	if err != nil && !errors.Is(err, docker.ErrNotFound) {
		return false, err
	}
	if _, err = identity.WorkspaceVolume(ctx, r.Engine, s.id); !errors.Is(err, docker.ErrNotFound) {
		return err == nil, err
	}
	_, err = r.Engine.InspectVolume(ctx, naming.Claim(s.id.Key))
	if !errors.Is(err, docker.ErrNotFound) {
		return err == nil, err
	}
	for _, name := range []string{naming.MoveStaging(s.id.Key, s.id.Instance), naming.MoveVerified(s.id.Key, s.id.Instance)} {
		if v, err := r.ownedVolume(ctx, s, name); err != nil || v != nil {
			return err == nil, err
		}
	}
	return false, nil
}

// recordNode writes, in per-node mode, the node whose engine runs the
// sandbox once it is Ready there; a sandbox that arrived says so once the
// records of its move here are gone (settleMove), whichever path its
// reconcile took: a reconcile that finds its container Ready may not pass
// through moveIn.
func (r *Reconciler) recordNode(ctx context.Context, s *sandboxScope) {
	if !r.Config.PerNode || s.moving || !meta.IsStatusConditionTrue(s.sbx.Status.Conditions, afev1.ContainerReadyCondition) {
		return
	}
	if node := s.sbx.Status.Node; node != "" && node != r.Config.Instance {
		if err := r.settleMove(ctx, s); err != nil {
			logf.FromContext(ctx).Error(err, "Remove the records of the move here; status.node is written once they are gone")
			return
		}
	}
	s.sbx.Status.Node = r.Config.Instance
}
