package sandbox

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/controllers/shared"
	"afe.dev/sandbox/docker"
)

// diskProbe is the manager's probe when it shares one (Probe), else the
// reconciler's own.
func (r *Reconciler) diskProbe() *shared.DiskProbe {
	if r.Probe != nil {
		return r.Probe
	}
	return &r.ownProbe
}

// resolveDisk sets how the sandbox's disk limit is enforced, and says so in
// the status.
func (r *Reconciler) resolveDisk(ctx context.Context, s *sandboxScope) error {
	if s.sbx.Spec.Resources.Disk == nil {
		s.sbx.Status.DiskEnforcement = ""
		return nil
	}
	mode, err := r.diskProbe().Enforcement(ctx, r.Engine)
	if err != nil {
		return err
	}
	s.resolved.DiskEnforcement = mode
	s.sbx.Status.DiskEnforcement = mode
	return nil
}

// stopOverDisk stops a sandbox that is over its resources.disk (why): its
// container is removed with the volumes of its image (the workspace is
// kept) and not made again while it is measured over the limit.
func (r *Reconciler) stopOverDisk(ctx context.Context, s *sandboxScope, have *docker.Container, why string) error {
	if have != nil {
		logf.FromContext(ctx).Info("Stopping the sandbox: it is over resources.disk", "container", have.Name, "why", why)
		if err := r.Engine.RemoveContainer(ctx, have.ID); err != nil {
			return err
		}
		r.Recorder.Eventf(s.sbx, nil, corev1.EventTypeWarning, afev1.DiskQuotaExceededReason, "Stop",
			"%s; container %s stopped", why, have.Name)
	}
	if err := r.removeImageVolumes(ctx, s); err != nil {
		return err
	}
	s.sbx.Status.ContainerID = ""
	what := "raise resources.disk to start it again"
	if _, measured := r.Disk.Workspace(string(s.sbx.UID)); !measured {
		what = "remove resources.disk to start it again and delete what cannot be measured, or delete the sandbox"
	}
	shared.SetCondition(s.sbx, afev1.ContainerReadyCondition, false, afev1.DiskQuotaExceededReason,
		why+": the container was stopped and the workspace kept; "+what)
	return nil
}

// storageQuotaRefused handles the engine refusing a storage quota: the
// container is made again with a read-only root.
func (r *Reconciler) storageQuotaRefused(ctx context.Context, err error) (ctrl.Result, error) {
	if !errors.Is(err, docker.ErrStorageQuotaUnsupported) {
		return ctrl.Result{}, err
	}
	r.diskProbe().Refused(ctx)
	return ctrl.Result{RequeueAfter: shared.StaleRetry}, nil
}
