package controllers

import (
	"context"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	ctrl "sigs.k8s.io/controller-runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/docker"
)

// DiskMeter holds the last measured size of every workspace volume, by the
// UID of its Sandbox: the usage collector fills it, the Sandbox reconciler
// stops a sandbox whose workspace is over its resources.disk.
type DiskMeter struct {
	mu        sync.Mutex
	workspace map[string]int64
}

// set replaces the measurement.
func (m *DiskMeter) set(workspace map[string]int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.workspace = workspace
}

// Workspace is the last measured size of the sandbox's workspace.
func (m *DiskMeter) Workspace(uid string) (int64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.workspace[uid]
	return b, ok
}

// overDisk is the measured workspace size when it is over the sandbox's
// resources.disk.
func (m *DiskMeter) overDisk(sbx *afev1.Sandbox) (int64, bool) {
	if m == nil || sbx.Spec.Resources.Disk == nil {
		return 0, false
	}
	used, ok := m.Workspace(string(sbx.UID))
	return used, ok && used > sbx.Spec.Resources.Disk.Value()
}

// diskProbe decides once per process how resources.disk is enforced on the
// engine: by the engine's storage quota where its driver may have one, and
// by a read-only root otherwise or after the engine refused a quota.
type diskProbe struct {
	mu    sync.Mutex
	known bool
	mode  afev1.DiskEnforcement
}

func (p *diskProbe) enforcement(ctx context.Context, engine docker.Engine) (afev1.DiskEnforcement, error) {
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
func (r *SandboxReconciler) resolveDisk(ctx context.Context, s *sandboxScope) error {
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

// stopOverDisk stops a sandbox whose workspace passed its resources.disk:
// its container is removed (the workspace is kept) and not made again while
// the workspace is measured over the limit. True when it is stopped.
func (r *SandboxReconciler) stopOverDisk(ctx context.Context, s *sandboxScope, have *docker.Container) (bool, error) {
	used, over := r.Disk.overDisk(s.sbx)
	if !over {
		return false, nil
	}
	limit := s.sbx.Spec.Resources.Disk
	if have != nil {
		logf.FromContext(ctx).Info("Stopping the sandbox: its workspace is over resources.disk", "container", have.Name, "used", used, "limit", limit.Value())
		if err := r.Engine.RemoveContainer(ctx, have.ID); err != nil {
			return true, err
		}
		r.Recorder.Eventf(s.sbx, nil, corev1.EventTypeWarning, afev1.DiskQuotaExceededReason, "Stop",
			"Workspace uses %s, over resources.disk %s; container %s stopped", bytesOf(used), limit.String(), have.Name)
	}
	s.sbx.Status.ContainerID = ""
	setCondition(s.sbx, afev1.ContainerReadyCondition, false, afev1.DiskQuotaExceededReason,
		fmt.Sprintf("The workspace uses %s, over resources.disk %s: the container was stopped and the workspace kept; raise resources.disk to start it again",
			bytesOf(used), limit.String()))
	return true, nil
}

// storageQuotaRefused handles the engine refusing a storage quota: the
// container is made again with a read-only root.
func (r *SandboxReconciler) storageQuotaRefused(ctx context.Context, err error) (ctrl.Result, error) {
	if !errors.Is(err, docker.ErrStorageQuotaUnsupported) {
		return ctrl.Result{}, err
	}
	r.disk.refused(ctx)
	return ctrl.Result{RequeueAfter: staleRetry}, nil
}

// bytesOf is a size as a binary quantity ("17Mi").
func bytesOf(n int64) string {
	q := resource.NewQuantity(n&^(1<<20-1), resource.BinarySI)
	return q.String()
}
