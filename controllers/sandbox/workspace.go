package sandbox

import (
	"context"
	"errors"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/controllers/identity"
	"afe.dev/sandbox/controllers/writes"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/naming"
	"afe.dev/sandbox/internal/sandboxspec"
)

// reconcileWorkspace makes the workspace volume exist, or resolves the folder.
func (r *Reconciler) reconcileWorkspace(ctx context.Context, s *sandboxScope) (ctrl.Result, error) {
	if s.sbx.Spec.Workspace.Type == afev1.WorkspaceFolder {
		return r.reconcileFolder(ctx, s)
	}
	if s.claimed != nil {
		return r.claimedWorkspace(ctx, s)
	}
	if r.arriving(s) {
		v, res, err := r.moveIn(ctx, s)
		if v != nil {
			s.resolved.Workspace = v.Name
			s.sbx.Status.VolumeName = v.Name
			writes.SetCondition(s.sbx, afev1.WorkspaceReadyCondition, true, afev1.MovedReason,
				"Volume "+v.Name+", holding the workspace moved from node "+s.sbx.Status.Node+", is mounted at /workspace")
			return ctrl.Result{}, nil
		}
		if err != nil || !res.IsZero() {
			return res, err
		}
	}
	if done, res, err := r.lostWorkspace(ctx, s); done || err != nil {
		return res, err
	}
	// A workspace that starts from a snapshot: the snapshot is checked
	// before anything is created.
	restore, err := r.mustRestore(ctx, s)
	if err != nil {
		return ctrl.Result{}, err
	}
	if restore {
		if missing, err := r.snapshotMissing(ctx, s); err != nil || missing {
			return ctrl.Result{RequeueAfter: snapshotRetry}, err
		}
	}
	v, err := r.ensureWorkspaceVolume(ctx, s)
	if err != nil {
		return ctrl.Result{}, err
	}
	if v == nil {
		return s.notAdopted(afev1.WorkspaceReadyCondition, "Volume", naming.Volume(s.id.Key))
	}
	if restore {
		if err := r.restoreWorkspace(ctx, s, v.Name); err != nil {
			return ctrl.Result{}, err
		}
	}
	s.resolved.Workspace = v.Name
	s.sbx.Status.VolumeName = v.Name
	reason, msg := afev1.ReadyReason, "Volume "+v.Name+" is mounted at /workspace"
	if from := s.sbx.Spec.Workspace.FromSnapshot; from != "" {
		reason, msg = afev1.RestoredFromSnapshotReason, "Volume "+v.Name+", made from snapshot "+from+", is mounted at /workspace"
	} else if c := meta.FindStatusCondition(s.sbx.Status.Conditions, afev1.WorkspaceReadyCondition); c != nil &&
		c.Status == metav1.ConditionTrue && c.Reason == afev1.RestoredFromSnapshotReason {
		reason, msg = c.Reason, c.Message // restored after its node was lost, and kept
	}
	writes.SetCondition(s.sbx, afev1.WorkspaceReadyCondition, true, reason, msg)
	return ctrl.Result{}, nil
}

// lostWorkspace is the workspace of a ticket placed anew after its node
// was lost: its newest snapshot on a reachable engine (lostrestore.go).
// done is false when there is none, and the workspace is made as for any
// sandbox.
func (r *Reconciler) lostWorkspace(ctx context.Context, s *sandboxScope) (done bool, res ctrl.Result, err error) {
	ticketUID, err := r.afterNodeLost(ctx, s)
	if err != nil || ticketUID == "" {
		return false, ctrl.Result{}, err
	}
	v, from, res, err := r.restoreAfterNodeLost(ctx, s, ticketUID)
	if err != nil || v == nil && !res.IsZero() {
		return true, res, err
	}
	if from == "" {
		return false, ctrl.Result{}, nil
	}
	s.resolved.Workspace = v.Name
	s.sbx.Status.VolumeName = v.Name
	writes.SetCondition(s.sbx, afev1.WorkspaceReadyCondition, true, afev1.RestoredFromSnapshotReason,
		"Volume "+v.Name+", made from "+from+" (the ticket's newest after its node was lost), is mounted at /workspace")
	return true, ctrl.Result{}, nil
}

// claimedWorkspace is the workspace of a sandbox served from a pool: its
// member's volume, as the record binds it.
func (r *Reconciler) claimedWorkspace(ctx context.Context, s *sandboxScope) (ctrl.Result, error) {
	v, err := identity.WorkspaceVolume(ctx, r.Engine, s.id)
	if errors.Is(err, docker.ErrNotFound) {
		// The member's workspace is gone: a loss, released and made again
		// by the next reconcile.
		writes.SetCondition(s.sbx, afev1.WorkspaceReadyCondition, false, afev1.SandboxLostReason,
			"The workspace volume of the pool member was lost")
		return ctrl.Result{}, r.releaseLost(ctx, s)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	s.resolved.Workspace = v.Name
	s.sbx.Status.VolumeName = v.Name
	writes.SetCondition(s.sbx, afev1.WorkspaceReadyCondition, true, afev1.ReadyReason,
		"Volume "+v.Name+", of a member of pool "+s.sbx.Status.Pool+", is mounted at /workspace")
	return ctrl.Result{}, nil
}

// ensureWorkspaceVolume returns the sandbox's workspace volume, made when it
// has none (a legacy-named one of an earlier controller version is kept).
// A volume of the name left by an earlier Sandbox of this namespace and name
// is an orphan and is replaced at once; nil means the name is taken by an
// object that is not ours to touch.
func (r *Reconciler) ensureWorkspaceVolume(ctx context.Context, s *sandboxScope) (*docker.Volume, error) {
	v, err := identity.WorkspaceVolume(ctx, r.Engine, s.id)
	if err == nil || !errors.Is(err, docker.ErrNotFound) {
		return v, err
	}
	v, err = r.Engine.EnsureVolume(ctx, sandboxspec.Volume(s.id))
	if err != nil {
		return nil, err
	}
	if s.id.OwnsAs(v.Labels, afev1.RoleWorkspace) {
		return v, nil
	}
	if !s.id.Stale(v.Labels, afev1.RoleWorkspace) {
		return nil, nil
	}
	if err := r.removeStale(ctx, s, v.Labels); err != nil {
		return nil, err
	}
	logf.FromContext(ctx).Info("Removing the workspace volume of an earlier sandbox of this name", "volume", v.Name)
	if err := r.Engine.RemoveVolume(ctx, v.Name); err != nil {
		return nil, err
	}
	v, err = r.Engine.EnsureVolume(ctx, sandboxspec.Volume(s.id))
	if err != nil || !s.id.OwnsAs(v.Labels, afev1.RoleWorkspace) {
		return nil, err
	}
	return v, nil
}

// removeOwnedVolume removes the workspace volume, under its current and its
// legacy name, when it is this sandbox's.
func (r *Reconciler) removeOwnedVolume(ctx context.Context, s *sandboxScope) error {
	for {
		v, err := identity.WorkspaceVolume(ctx, r.Engine, s.id)
		if errors.Is(err, docker.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := r.Engine.RemoveVolume(ctx, v.Name); err != nil {
			return err
		}
	}
}
