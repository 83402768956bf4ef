package sandbox

import (
	"context"
	"errors"
	"sync"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/controllers/shared"
	"afe.dev/sandbox/docker"
)

// diskProbe decides once per process how resources.disk is enforced on the
// engine: by the engine's storage quota where its driver may have one, and
// by a read-only root otherwise or after the engine refused a quota.
type diskProbe struct {
	mu    sync.Mutex
	known bool
	mode  afev1.DiskEnforcement
}

func (p *diskProbe) enforcement(ctx context.Context, engine Engine) (afev1.DiskEnforcement, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.known {
		return p.mode, nil
	}
	quota, err := engine.StorageQuota(ctx)
	if err != nil {
		return "", err
	}
	p.known, p.mode = true, afev1.DiskReadOnlyRoot
	if quota {
		p.mode = afev1.DiskStorageQuota
	}
	logf.FromContext(ctx).Info("Disk limits are enforced", "enforcement", p.mode)
	return p.mode, nil
}

// refused records that the engine cannot limit a writable layer after all
// (xfs without project quotas).
func (p *diskProbe) refused(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mode != afev1.DiskReadOnlyRoot {
		logf.FromContext(ctx).Info("The engine refused a storage quota; disk limits are enforced with a read-only root")
	}
	p.known, p.mode = true, afev1.DiskReadOnlyRoot
}

// resolveDisk sets how the sandbox's disk limit is enforced, and says so in
// the status.
func (r *Reconciler) resolveDisk(ctx context.Context, s *sandboxScope) error {
	if s.sbx.Spec.Resources.Disk == nil {
		s.sbx.Status.DiskEnforcement = ""
		return nil
	}
	mode, err := r.disk.enforcement(ctx, r.Engine)
	if err != nil {
		return err
	}
	s.resolved.DiskEnforcement = mode
	s.sbx.Status.DiskEnforcement = mode
	return nil
}

// stopOverDisk stops a sandbox that is over its resources.disk: its
// container is removed with the volumes of its image (the workspace is
// kept) and not made again while it is measured over the limit. True when
// it is stopped.
func (r *Reconciler) stopOverDisk(ctx context.Context, s *sandboxScope, have *docker.Container) (bool, error) {
	why, over := r.Disk.OverDisk(s.sbx)
	if !over {
		return false, nil
	}
	if have != nil {
		logf.FromContext(ctx).Info("Stopping the sandbox: it is over resources.disk", "container", have.Name, "why", why)
		if err := r.Engine.RemoveContainer(ctx, have.ID); err != nil {
			return true, err
		}
		r.Recorder.Eventf(s.sbx, nil, corev1.EventTypeWarning, afev1.DiskQuotaExceededReason, "Stop",
			"%s; container %s stopped", why, have.Name)
	}
	if err := r.removeImageVolumes(ctx, s); err != nil {
		return true, err
	}
	s.sbx.Status.ContainerID = ""
	what := "raise resources.disk to start it again"
	if _, measured := r.Disk.Workspace(string(s.sbx.UID)); !measured {
		what = "remove resources.disk to start it again and delete what cannot be measured, or delete the sandbox"
	}
	shared.SetCondition(s.sbx, afev1.ContainerReadyCondition, false, afev1.DiskQuotaExceededReason,
		why+": the container was stopped and the workspace kept; "+what)
	return true, nil
}

// storageQuotaRefused handles the engine refusing a storage quota: the
// container is made again with a read-only root.
func (r *Reconciler) storageQuotaRefused(ctx context.Context, err error) (ctrl.Result, error) {
	if !errors.Is(err, docker.ErrStorageQuotaUnsupported) {
		return ctrl.Result{}, err
	}
	r.disk.refused(ctx)
	return ctrl.Result{RequeueAfter: shared.StaleRetry}, nil
}
