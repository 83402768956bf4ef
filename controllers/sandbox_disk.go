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
	"afe.dev/sandbox/internal/sandboxspec"
)

// DiskMeter holds the last measured use of disk of every sandbox's volumes
// (its workspace and the volumes of its image's VOLUME paths), by the UID
// of its Sandbox: the usage collector fills it, the Sandbox reconciler
// stops a sandbox that is over its resources.disk.
type DiskMeter struct {
	mu   sync.Mutex
	used map[string]diskUse
}

// diskUse is what the volumes of one sandbox hold.
type diskUse struct {
	bytes int64
	// unmeasured names a volume whose size the engine could not tell: it
	// reports -1 when its walk of the volume fails, as on a path longer
	// than the host allows, which the workload can make.
	unmeasured string
}

// set replaces the measurement.
func (m *DiskMeter) set(used map[string]diskUse) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.used = used
}

// Workspace is the last measured size of the sandbox's volumes; false when
// they were not measured, or could not be.
func (m *DiskMeter) Workspace(uid string) (int64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, ok := m.used[uid]
	return d.bytes, ok && d.unmeasured == ""
}

// overDisk says why the sandbox is over its resources.disk, when it is:
// its volumes and the most the engine keeps of its logs (and its proxy's)
// together pass the limit, or a volume of it cannot be measured, which
// counts as over: a limit that a workload could switch off by making its
// volume unmeasurable would be none.
func (m *DiskMeter) overDisk(sbx *afev1.Sandbox) (string, bool) {
	if m == nil || sbx.Spec.Resources.Disk == nil {
		return "", false
	}
	m.mu.Lock()
	d, ok := m.used[string(sbx.UID)]
	m.mu.Unlock()
	limit := sbx.Spec.Resources.Disk
	switch {
	case !ok:
		return "", false
	case d.unmeasured != "":
		return fmt.Sprintf("The engine cannot measure volume %s (it reports no size, as for a path longer than the host allows), so its use of resources.disk %s is unknown",
			d.unmeasured, limit.String()), true
	}
	logs := sandboxspec.LogReserve(sbx)
	if d.bytes+logs <= limit.Value() {
		return "", false
	}
	return fmt.Sprintf("The volumes use %s and the logs may keep %s, over resources.disk %s", bytesOf(d.bytes), bytesOf(logs), limit.String()), true
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

// stopOverDisk stops a sandbox that is over its resources.disk: its
// container is removed with the volumes of its image (the workspace is
// kept) and not made again while it is measured over the limit. True when
// it is stopped.
func (r *SandboxReconciler) stopOverDisk(ctx context.Context, s *sandboxScope, have *docker.Container) (bool, error) {
	why, over := r.Disk.overDisk(s.sbx)
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
	setCondition(s.sbx, afev1.ContainerReadyCondition, false, afev1.DiskQuotaExceededReason,
		why+": the container was stopped and the workspace kept; "+what)
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

// diskUses are the sizes of the volumes of each sandbox of the instance
// that count against resources.disk, by the UID of its Sandbox.
func diskUses(disk *docker.DiskUsage, instance string) map[string]diskUse {
	used := map[string]diskUse{}
	for name, v := range disk.Volumes {
		role := v.Labels[afev1.LabelRole]
		if v.Labels[afev1.LabelController] != instance || role != afev1.RoleWorkspace && role != afev1.RoleImageVolume {
			continue
		}
		uid := v.Labels[afev1.LabelSandboxUID]
		d := used[uid]
		if v.Bytes < 0 {
			d.unmeasured = name
		} else {
			d.bytes += v.Bytes
		}
		used[uid] = d
	}
	return used
}
