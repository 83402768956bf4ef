package sandbox

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/controllers/identity"
	"afe.dev/sandbox/controllers/writes"
)

// reconcileDelete removes the sandbox's Docker objects, newest first, then
// the finalizer.
func (r *Reconciler) reconcileDelete(ctx context.Context, s *sandboxScope) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(s.sbx, afev1.SandboxFinalizer) {
		r.forget(s.sbx.UID) // its finalizer removed by another
		return ctrl.Result{}, nil
	}
	log := logf.FromContext(ctx)
	// Newest first: the containers (the sandbox's, its proxy, any copy
	// helper a crash left, which would hold the volumes), its network, and
	// last the workspace.
	// Each kind in one list of the objects labelled with the Sandbox's UID,
	// whatever their names (a legacy name's too), each checked as this
	// sandbox's in its role before it goes.
	// A member it claimed first, its record last (claim.go).
	if err := r.removeObjects(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	log.Info("Removed the sandbox's Docker objects")
	removed, err := writes.RemoveFinalizer(ctx, r.Client, s.sbx, afev1.SandboxFinalizer)
	if err != nil || !removed {
		return ctrl.Result{}, err
	}
	r.forget(s.sbx.UID)
	r.mem.finalized.forget(client.ObjectKeyFromObject(s.sbx), s.sbx.UID)
	r.mem.rememberFinalized(s.sbx.UID)
	// No Event: the Sandbox is gone, and its ticket's CleanedUp condition
	// says so.
	return ctrl.Result{}, nil
}

// deletedUnfinalized removes the objects of a Sandbox deleted before its
// finalizer was written (ensureFinalizer), which no reconcile of its
// deletion will: those a claim of this reconcile bound to it, found by its
// UID and checked in their roles as on any deletion.
func (r *Reconciler) deletedUnfinalized(ctx context.Context, s *sandboxScope) error {
	if controllerutil.ContainsFinalizer(s.sbx, afev1.SandboxFinalizer) {
		return nil // its deletion is reconciled, or the sweep's
	}
	if err := r.removeObjects(ctx, s); err != nil {
		return err
	}
	logf.FromContext(ctx).Info("Removed the Docker objects of a Sandbox deleted before its finalizer was written")
	r.forget(s.sbx.UID)
	r.mem.finalized.forget(client.ObjectKeyFromObject(s.sbx), s.sbx.UID)
	r.mem.rememberFinalized(s.sbx.UID)
	return nil
}

// removeObjects removes the sandbox's Docker objects, newest first: a
// member it claimed, its containers, its network, its volumes.
func (r *Reconciler) removeObjects(ctx context.Context, s *sandboxScope) error {
	if err := r.releaseOwnClaim(ctx, s); err != nil {
		return err
	}
	if err := r.removeLabelledContainers(ctx, s); err != nil {
		return err
	}
	if err := r.removeOwnedNetworks(ctx, s); err != nil {
		return err
	}
	s.sbx.Status.ProxyName, s.sbx.Status.ProxyURL, s.sbx.Status.NetworkName = "", "", ""
	return r.removeOwnedVolumes(ctx, s)
}

// removeLabelledContainers removes every container labelled as this
// sandbox's, in one list: the proxy, and the snapshot copy helpers of a
// copy cut short by a crash.
func (r *Reconciler) removeLabelledContainers(ctx context.Context, s *sandboxScope) error {
	return identity.RemoveContainers(ctx, r.Engine, s.labelled())
}

// labelled are the labels every object of the sandbox carries.
func (s *sandboxScope) labelled() map[string]string {
	return map[string]string{afev1.LabelController: s.id.Instance, afev1.LabelSandboxUID: s.id.UID}
}

// removeOwnedNetworks removes the sandbox's networks (its egress network),
// in one list.
func (r *Reconciler) removeOwnedNetworks(ctx context.Context, s *sandboxScope) error {
	networks, err := r.Engine.ListNetworks(ctx, s.labelled())
	if err != nil {
		return err
	}
	for _, n := range networks {
		if s.id.OwnsAs(n.Labels, afev1.RoleNetwork) {
			if err := r.Engine.RemoveNetwork(ctx, n.ID); err != nil {
				return err
			}
		}
	}
	return nil
}

// removeOwnedVolumes removes, in one list, the sandbox's workspace volume,
// the volumes of its image's VOLUME paths, and the snapshot volumes of a Sandbox without ticket. A ticket's
// snapshots belong to the ticket: they go when it finishes, unless it
// retains them.
func (r *Reconciler) removeOwnedVolumes(ctx context.Context, s *sandboxScope) error {
	volumes, err := r.Engine.ListVolumes(ctx, s.labelled())
	if err != nil {
		return err
	}
	ownSnapshots := s.sbx.Spec.TicketRef == nil || s.sbx.Spec.TicketRef.Name == ""
	for _, v := range volumes {
		// A move's staging and verified volumes are copy helpers'.
		if s.id.OwnsAs(v.Labels, afev1.RoleWorkspace) || s.id.OwnsAs(v.Labels, afev1.RoleImageVolume) || s.id.OwnsAs(v.Labels, afev1.RoleSnapshotCopy) ||
			ownSnapshots && s.id.OwnsAs(v.Labels, afev1.RoleSnapshot) {
			if err := r.Engine.RemoveVolume(ctx, v.Name); err != nil {
				return err
			}
		}
	}
	return nil
}
