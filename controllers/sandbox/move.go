package sandbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/controllers/identity"
	"afe.dev/sandbox/controllers/writes"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/naming"
	"afe.dev/sandbox/internal/sandboxspec"
	"afe.dev/sandbox/internal/tarbound"
	"afe.dev/sandbox/move"
)

// A sandbox whose ticket was moved off a drained node (per-node mode,
// NodeDrained) keeps its UID. The manager of the node it arrives on (B)
// finds status.node naming another node (A): it takes the Run logs and the
// workspace from A's manager (move.Mover, which A answers only for the
// sandbox of this UID placed on B, and which stops A's container first),
// fills a volume with them and verifies them, then records that on its
// engine (the volume naming.MoveVerified). A's manager asks B's whether it
// holds the sandbox (that record, or its running container) and only then
// removes its own objects. B runs the container on the workspace, and once
// it is Ready writes status.node = B. Nodes that share one engine (make
// run NODES=3, the tests) name their objects alike: B fills a staging
// volume while A's workspace volume holds the name, and copies it over
// once A has removed its own.
// status.node is the tenant's to write: a forged one only has B ask
// another manager, which answers only as above.

// moveRetry is how often a move waiting for the other node's manager is
// tried again.
const moveRetry = 2 * time.Second

// arriving is true when the sandbox's workspace is on another node's
// engine, which its ticket left (a Volume workspace; a Folder never moves).
func (r *Reconciler) arriving(s *sandboxScope) bool {
	node := s.sbx.Status.Node
	return r.Config.PerNode && r.Config.Moves != nil && s.sbx.Spec.Workspace.Type != afev1.WorkspaceFolder &&
		node != "" && node != r.Config.Instance
}

// moveIn takes the workspace of a sandbox arriving from another node. It
// returns the workspace volume filled (nil when the move is over already,
// or there was nothing to move, and the workspace is made as for any
// sandbox), or a result that ends the phase.
func (r *Reconciler) moveIn(ctx context.Context, s *sandboxScope) (*docker.Volume, ctrl.Result, error) {
	sbx, from := s.sbx, s.sbx.Status.Node
	log := logf.FromContext(ctx).WithValues("from", from)
	have, err := r.Engine.InspectContainer(ctx, s.containerName())
	switch {
	case err == nil && s.id.OwnsAs(have.Labels, afev1.RoleSandbox):
		// Moved: its container runs on the workspace moved here.
		sbx.Status.ContainerID = have.ID
		return nil, ctrl.Result{}, r.settleMove(ctx, s)
	case err != nil && !errors.Is(err, docker.ErrNotFound):
		return nil, ctrl.Result{}, err
	}
	// Until its container runs here, status.node keeps naming the node it
	// comes from (recordNode).
	s.moving = true
	writes.SetCondition(sbx, afev1.ContainerReadyCondition, false, afev1.NodeDrainedReason,
		"The sandbox is moving from node "+from+" with its workspace")
	verified, res, err := r.moveRecord(ctx, s)
	if err != nil || !res.IsZero() {
		return nil, res, err
	}
	if verified == nil {
		// The WorkspaceReady condition of the attempt before stays.
		if wait := r.mem.moves.wait(sbx.UID, time.Now()); wait > 0 {
			log.V(1).Info("Waiting before the workspace is transferred again", "wait", wait)
			return nil, ctrl.Result{RequeueAfter: wait}, nil
		}
		if res, err := r.takeMoved(ctx, s); err != nil || !res.IsZero() {
			return nil, res, err
		}
		if sbx.Status.Node == r.Config.Instance {
			s.moving = false
			return nil, ctrl.Result{}, nil // nothing to move
		}
	}
	// Its container there is not lost: it moved.
	sbx.Status.ContainerID, sbx.Status.Pool = "", ""
	return r.placeMoved(ctx, s, log)
}

// takeMoved takes the Run logs and the workspace from the node the ticket
// left, into the workspace volume when its name is free on this engine,
// or else into the staging volume, and records it verified. It returns a
// result that ends the phase while the other node's manager does not
// answer; with nothing to move there, status.node is this node's and the
// sandbox is made as for any other (its container lost, SandboxLost).
func (r *Reconciler) takeMoved(ctx context.Context, s *sandboxScope) (ctrl.Result, error) {
	sbx, from := s.sbx, s.sbx.Status.Node
	log := logf.FromContext(ctx).WithValues("from", from)
	// The Run logs first: nothing is filled until they are here.
	runs, err := r.runsOf(ctx, sbx)
	if err == nil {
		uids := make([]types.UID, 0, len(runs))
		for i := range runs {
			uids = append(uids, runs[i].UID)
		}
		err = r.Config.Moves.RunLogs(ctx, from, sbx, uids)
	}
	var tree *move.Workspace
	if err == nil {
		tree, err = r.Config.Moves.Workspace(ctx, from, sbx)
	}
	switch {
	case errors.Is(err, move.ErrNothingToMove):
		log.Info("Nothing of the sandbox to move from the node its ticket left", "reason", err.Error())
		r.Recorder.Eventf(sbx, nil, corev1.EventTypeWarning, afev1.SandboxLostReason, "Move",
			"Node %s's manager has no workspace of the sandbox to move: %v", from, err)
		sbx.Status.Node = r.Config.Instance
		return ctrl.Result{}, nil
	case err != nil:
		writes.SetCondition(sbx, afev1.WorkspaceReadyCondition, false, afev1.NodeDrainedReason,
			fmt.Sprintf("Waiting for the workspace from node %s, which the ticket left: %v", from, err))
		log.Info("The workspace cannot be moved yet", "error", err.Error())
		return ctrl.Result{RequeueAfter: moveRetry}, nil
	}
	defer func() { _ = tree.Tree.Close() }()
	r.mem.moves.begin(sbx.UID, time.Now())
	return r.receiveMoved(ctx, s, tree, log)
}

// receiveMoved fills the moved tree into its volume and records it
// verified, with a record of its own: a volume of the record's name made
// by another in the meantime is a conflict, and what was filled goes.
func (r *Reconciler) receiveMoved(ctx context.Context, s *sandboxScope, tree *move.Workspace, log logr.Logger) (ctrl.Result, error) {
	into, err := r.moveTarget(ctx, s)
	if err != nil {
		return ctrl.Result{}, err
	}
	n, err := r.fillMoved(ctx, s, into, tree)
	if err != nil {
		return ctrl.Result{RequeueAfter: moveRetry}, err
	}
	name := naming.MoveVerified(s.id.Key, s.id.Instance)
	rec, err := r.Engine.EnsureVolume(ctx, docker.VolumeSpec{Name: name, Labels: s.id.Labels(afev1.RoleSnapshotCopy)})
	if err != nil {
		return ctrl.Result{}, err
	}
	if !s.id.OwnsAs(rec.Labels, afev1.RoleSnapshotCopy) {
		res, err := s.notAdopted(afev1.WorkspaceReadyCondition, "Volume", name)
		return res, errors.Join(err, r.removeFilled(ctx, s, into))
	}
	log.Info("Took the workspace from the node its ticket left", "volume", into.Name, "bytes", n)
	r.Recorder.Eventf(s.sbx, nil, corev1.EventTypeNormal, afev1.MovedReason, "Move",
		"Workspace moved from node %s (%d bytes of tar, size and SHA-256 verified)", s.sbx.Status.Node, n)
	return ctrl.Result{}, nil
}

// moveTarget is the volume a moved workspace is filled into, made empty:
// the workspace volume, or the staging volume while another instance's
// volume holds its name on this engine.
func (r *Reconciler) moveTarget(ctx context.Context, s *sandboxScope) (docker.VolumeSpec, error) {
	// What an attempt cut short left holds part of the tree.
	if err := errors.Join(r.removeOwnedVolume(ctx, s), r.removeMoveVolumes(ctx, s)); err != nil {
		return docker.VolumeSpec{}, err
	}
	v, err := r.ensureWorkspaceVolume(ctx, s)
	if err != nil {
		return docker.VolumeSpec{}, err
	}
	if v != nil {
		return docker.VolumeSpec{Name: v.Name}, nil
	}
	staging := docker.VolumeSpec{Name: naming.MoveStaging(s.id.Key, s.id.Instance), Labels: s.id.Labels(afev1.RoleSnapshotCopy)}
	got, err := r.Engine.EnsureVolume(ctx, staging)
	if err != nil {
		return docker.VolumeSpec{}, err
	}
	if !s.id.OwnsAs(got.Labels, afev1.RoleSnapshotCopy) {
		return docker.VolumeSpec{}, fmt.Errorf("volume %s belongs to another sandbox or controller instance", staging.Name)
	}
	return staging, nil
}

// placeMoved is the workspace volume of a moved workspace recorded
// verified: the volume itself, or, once its name is free on this engine,
// a copy of the staging volume.
func (r *Reconciler) placeMoved(ctx context.Context, s *sandboxScope, log logr.Logger) (*docker.Volume, ctrl.Result, error) {
	staging, err := r.ownedVolume(ctx, s, naming.MoveStaging(s.id.Key, s.id.Instance))
	if err != nil {
		return nil, ctrl.Result{}, err
	}
	if staging == nil {
		v, err := identity.WorkspaceVolume(ctx, r.Engine, s.id)
		if errors.Is(err, docker.ErrNotFound) {
			// Removed since it was filled: taken again.
			return nil, ctrl.Result{RequeueAfter: moveRetry}, r.removeMoveVolumes(ctx, s)
		}
		return v, ctrl.Result{}, err
	}
	v, err := r.ensureWorkspaceVolume(ctx, s)
	if err != nil {
		return nil, ctrl.Result{}, err
	}
	if v == nil {
		writes.SetCondition(s.sbx, afev1.WorkspaceReadyCondition, false, afev1.NodeDrainedReason, fmt.Sprintf(
			"The workspace arrived from node %s and was verified; waiting for that node's manager to remove its copy", s.sbx.Status.Node))
		return nil, ctrl.Result{RequeueAfter: moveRetry}, nil
	}
	n, err := r.Engine.CopyWorkspace(ctx, docker.CopySpec{
		Name:   naming.Move(s.id.Key) + "-place",
		Image:  s.sbx.Spec.Image,
		Labels: s.id.Labels(afev1.RoleSnapshotCopy),
		From:   docker.Mount{Type: docker.MountVolume, Source: staging.Name},
		To:     docker.Mount{Type: docker.MountVolume, Source: v.Name},
		// Bounded when it was filled; bounded again, as every copy is.
		MaxBytes: r.Config.CopyBytes(s.sbx),
	})
	if err != nil {
		return nil, ctrl.Result{}, errors.Join(fmt.Errorf("copy the moved workspace into %s: %w", v.Name, err), r.removeOwnedVolume(ctx, s))
	}
	log.Info("Copied the moved workspace into the workspace volume", "volume", v.Name, "bytes", n)
	if err := r.Engine.RemoveVolume(ctx, staging.Name); err != nil {
		return nil, ctrl.Result{}, err
	}
	return v, ctrl.Result{}, nil
}

// moveRecord is the sandbox's own record that its moved workspace arrived
// here whole; nil when there is none. A volume of the record's or the
// staging volume's name that is not this sandbox's of this instance
// (another instance's, on an engine the nodes share) is a conflict: it is
// never taken for this sandbox's, nothing is transferred while it is
// there, and the move is looked at again after writes.ConflictRetry.
func (r *Reconciler) moveRecord(ctx context.Context, s *sandboxScope) (*docker.Volume, ctrl.Result, error) {
	var verified *docker.Volume
	for _, name := range []string{naming.MoveStaging(s.id.Key, s.id.Instance), naming.MoveVerified(s.id.Key, s.id.Instance)} {
		v, err := r.Engine.InspectVolume(ctx, name)
		if errors.Is(err, docker.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, ctrl.Result{}, err
		}
		if !s.id.OwnsAs(v.Labels, afev1.RoleSnapshotCopy) {
			res, err := s.notAdopted(afev1.WorkspaceReadyCondition, "Volume", name)
			return nil, res, err
		}
		if name == naming.MoveVerified(s.id.Key, s.id.Instance) {
			verified = v
		}
	}
	return verified, ctrl.Result{}, nil
}

// settleMove ends the move of a sandbox whose container runs here: the
// records of its arrival go (on an engine the nodes share, a record left
// behind would stand in the way of its next move), its transfers are
// forgotten, and status.node may name this node (recordNode).
func (r *Reconciler) settleMove(ctx context.Context, s *sandboxScope) error {
	if err := r.removeMoveVolumes(ctx, s); err != nil {
		return err
	}
	r.mem.moves.forget(s.sbx.UID)
	s.moving = false
	return nil
}

// settleArrived settles the move once this reconcile has the moved
// container running (its ContainerReady condition).
func (r *Reconciler) settleArrived(ctx context.Context, s *sandboxScope) (ctrl.Result, error) {
	if !s.moving || !meta.IsStatusConditionTrue(s.sbx.Status.Conditions, afev1.ContainerReadyCondition) {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, r.settleMove(ctx, s)
}

// ownedVolume is the volume of that name when it is this sandbox's helper
// volume (RoleSnapshotCopy); nil when there is none.
func (r *Reconciler) ownedVolume(ctx context.Context, s *sandboxScope, name string) (*docker.Volume, error) {
	v, err := r.Engine.InspectVolume(ctx, name)
	if errors.Is(err, docker.ErrNotFound) {
		return nil, nil
	}
	if err != nil || !s.id.OwnsAs(v.Labels, afev1.RoleSnapshotCopy) {
		return nil, err
	}
	return v, nil
}

// removeMoveVolumes removes the staging and verified volumes of a move.
func (r *Reconciler) removeMoveVolumes(ctx context.Context, s *sandboxScope) error {
	for _, name := range []string{naming.MoveStaging(s.id.Key, s.id.Instance), naming.MoveVerified(s.id.Key, s.id.Instance)} {
		v, err := r.ownedVolume(ctx, s, name)
		if err != nil {
			return err
		}
		if v != nil {
			if err := r.Engine.RemoveVolume(ctx, v.Name); err != nil {
				return err
			}
		}
	}
	return nil
}

// fillMoved fills the volume into with the moved tree, the files of the
// user they had there made the sandbox's user's here, and verifies that
// the tree arrived whole; on any failure the volume is removed, and made
// again by the next attempt.
func (r *Reconciler) fillMoved(ctx context.Context, s *sandboxScope, into docker.VolumeSpec, tree *move.Workspace) (int64, error) {
	owners, err := r.movedOwners(s, tree.User)
	if err != nil {
		return 0, errors.Join(err, r.removeFilled(ctx, s, into))
	}
	n, err := r.Engine.FillWorkspace(ctx, docker.FillSpec{
		Name:     naming.Move(s.id.Key) + "-in",
		Labels:   s.id.Labels(afev1.RoleSnapshotCopy),
		To:       docker.Mount{Type: docker.MountVolume, Source: into.Name},
		Tree:     tree.Tree,
		MaxBytes: r.Config.CopyBytes(s.sbx),
		Owners:   owners,
	})
	if err == nil {
		err = tree.Verify()
	}
	if err == nil {
		return n, nil
	}
	if errors.Is(err, tarbound.ErrTooLarge) || errors.Is(err, tarbound.ErrSparse) {
		err = fmt.Errorf("the workspace holds more than %s, each file at its full size: %w", r.Config.CopyBound(s.sbx), err)
	}
	writes.SetCondition(s.sbx, afev1.WorkspaceReadyCondition, false, afev1.NodeDrainedReason,
		fmt.Sprintf("The workspace from node %s did not arrive whole; trying again: %v", s.sbx.Status.Node, err))
	return n, errors.Join(fmt.Errorf("move the workspace from node %s: %w", s.sbx.Status.Node, err), r.removeFilled(ctx, s, into))
}

// removeFilled removes the volume a moved tree was filled into: the
// staging volume (with the move's record), or the workspace volume.
func (r *Reconciler) removeFilled(ctx context.Context, s *sandboxScope, into docker.VolumeSpec) error {
	if into.Name == naming.MoveStaging(s.id.Key, s.id.Instance) {
		return r.removeMoveVolumes(ctx, s)
	}
	return r.removeOwnedVolume(ctx, s)
}

// movedOwners is the change of owner a moved workspace needs: a sandbox
// without spec.user has an id of each node's (ids.go).
func (r *Reconciler) movedOwners(s *sandboxScope, was string) (*docker.OwnerChange, error) {
	if was == "" {
		return nil, nil
	}
	fromUID, fromGID, err := sandboxspec.ParseUser(was)
	if err != nil {
		return nil, fmt.Errorf("the moved workspace's user: %w", err)
	}
	toUID, toGID, err := sandboxspec.UserOf(&s.sbx.Spec.SandboxTemplateSpec, s.resolved)
	if err != nil || fromUID == toUID && fromGID == toGID {
		return nil, err
	}
	return &docker.OwnerChange{From: docker.Owner{UID: fromUID, GID: fromGID}, To: docker.Owner{UID: toUID, GID: toGID}}, nil
}
