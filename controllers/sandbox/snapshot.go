package sandbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/controllers/writes"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/naming"
	"afe.dev/sandbox/internal/sandboxspec"
	"afe.dev/sandbox/internal/tarbound"
)

// snapshotRetry is how often a missing fromSnapshot is looked for again.
const snapshotRetry = 30 * time.Second

// errSnapshotMissing stops the recreation of a lost workspace whose
// fromSnapshot is gone; the WorkspaceReady condition says so.
var errSnapshotMissing = errors.New("the workspace's snapshot is missing")

// mustRestore is true when the workspace volume is about to be filled for a
// container that never ran on it: no container was recorded and none
// exists, and no earlier reconcile recorded the copy as done (a crash
// between the copy and its record copies again, onto a volume no container
// has used). A recreation after a loss restores in recreateAfterLoss instead.
func (r *Reconciler) mustRestore(ctx context.Context, s *sandboxScope) (bool, error) {
	if s.sbx.Spec.Workspace.FromSnapshot == "" || s.sbx.Status.ContainerID != "" {
		return false, nil
	}
	if c := meta.FindStatusCondition(s.sbx.Status.Conditions, afev1.ContainerReadyCondition); c != nil &&
		c.Reason == afev1.SandboxLostReason && c.Status != metav1.ConditionTrue {
		return false, nil
	}
	if c := meta.FindStatusCondition(s.sbx.Status.Conditions, afev1.WorkspaceReadyCondition); c != nil &&
		c.Reason == afev1.RestoredFromSnapshotReason && c.Status == metav1.ConditionTrue {
		// Filled by an earlier reconcile that stopped before the container
		// (the proxy not answering yet, say): not copied again.
		return false, nil
	}
	_, err := r.Engine.InspectContainer(ctx, s.containerName())
	if errors.Is(err, docker.ErrNotFound) {
		return true, nil
	}
	return false, err
}

// snapshotMissing checks that fromSnapshot names a snapshot volume of this
// namespace and controller instance; when it does not, it says so in the
// WorkspaceReady condition. A snapshot of another namespace is reported
// missing too: its content is not this sandbox's to read.
func (r *Reconciler) snapshotMissing(ctx context.Context, s *sandboxScope) (bool, error) {
	name := s.sbx.Spec.Workspace.FromSnapshot
	v, err := r.Engine.InspectVolume(ctx, name)
	if err != nil && !errors.Is(err, docker.ErrNotFound) {
		return false, err
	}
	if err == nil && v.Labels[afev1.LabelRole] == afev1.RoleSnapshot &&
		v.Labels[afev1.LabelNamespace] == s.id.Namespace && v.Labels[afev1.LabelController] == s.id.Instance {
		return false, nil
	}
	writes.SetCondition(s.sbx, afev1.WorkspaceReadyCondition, false, afev1.SnapshotNotFoundReason,
		fmt.Sprintf("Snapshot volume %s does not exist in this namespace; fix workspace.fromSnapshot", name))
	return true, nil
}

// restoreWorkspace fills the workspace volume with a copy of the snapshot
// before any container mounts it.
func (r *Reconciler) restoreWorkspace(ctx context.Context, s *sandboxScope, volume string) error {
	from := s.sbx.Spec.Workspace.FromSnapshot
	// The copy helpers are made of the sandbox's image.
	if err := r.ensureImage(ctx, s, afev1.ContainerReadyCondition, "Image", s.sbx.Spec.Image); err != nil {
		return err
	}
	owners, err := r.restoredOwners(ctx, s, from)
	if err != nil {
		return err
	}
	started := time.Now()
	n, err := r.Engine.CopyWorkspace(ctx, docker.CopySpec{
		Name:     naming.Restore(s.id.Key),
		Image:    s.sbx.Spec.Image,
		Labels:   s.id.Labels(afev1.RoleSnapshotCopy),
		From:     docker.Mount{Type: docker.MountVolume, Source: from},
		To:       docker.Mount{Type: docker.MountVolume, Source: volume},
		MaxBytes: r.Config.CopyBytes(s.sbx),
		Owners:   owners,
	})
	if errors.Is(err, tarbound.ErrTooLarge) || errors.Is(err, tarbound.ErrSparse) {
		// Nothing of a snapshot past the bound is kept: the volume is
		// removed, and made again for the next attempt.
		writes.SetCondition(s.sbx, afev1.WorkspaceReadyCondition, false, afev1.SnapshotTooLargeReason,
			fmt.Sprintf("Snapshot volume %s holds more than %s, each file at its full size; restore another snapshot or raise that bound", from, r.Config.CopyBound(s.sbx)))
		return errors.Join(fmt.Errorf("restore snapshot %s into %s: %w", from, volume, err), r.removeOwnedVolume(ctx, s))
	}
	if err != nil {
		return fmt.Errorf("restore snapshot %s into %s: %w", from, volume, err)
	}
	logf.FromContext(ctx).Info("Restored the workspace from a snapshot", "snapshot", from, "volume", volume, "bytes", n, "duration", time.Since(started))
	r.Recorder.Eventf(s.sbx, nil, corev1.EventTypeNormal, "Restored", "Restore", "Workspace volume %s filled from snapshot %s", volume, from)
	return nil
}

// restoredOwners is the change of owner a restore needs: the files of the
// sandbox the snapshot was taken from (its afe.uid label) become those of
// this sandbox's user. A snapshot without the label (taken before it
// existed) keeps its owners.
func (r *Reconciler) restoredOwners(ctx context.Context, s *sandboxScope, snapshot string) (*docker.OwnerChange, error) {
	v, err := r.Engine.InspectVolume(ctx, snapshot)
	if err != nil {
		return nil, err
	}
	label := v.Labels[afev1.LabelUser]
	if label == "" {
		return nil, nil // no owner recorded: none to change
	}
	fromUID, fromGID, err := sandboxspec.ParseUser(label)
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", snapshot, err)
	}
	toUID, toGID, err := sandboxspec.UserOf(&s.sbx.Spec.SandboxTemplateSpec, s.resolved)
	if err != nil {
		return nil, err
	}
	if fromUID == toUID && fromGID == toGID {
		return nil, nil
	}
	return &docker.OwnerChange{From: docker.Owner{UID: fromUID, GID: fromGID}, To: docker.Owner{UID: toUID, GID: toGID}}, nil
}
