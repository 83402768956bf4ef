package sandbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/controllers/disklimit"
	"afe.dev/sandbox/controllers/identity"
	"afe.dev/sandbox/controllers/writes"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/pool"
)

// diskProbe is the manager's probe when it shares one (Probe), else the
// reconciler's own.
func (r *Reconciler) diskProbe() *disklimit.Probe {
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
	r.overDiskCondition(s, why)
	return nil
}

// overDiskCondition states that the sandbox was stopped over its
// resources.disk or its inode bound (why), and how to start it again.
func (r *Reconciler) overDiskCondition(s *sandboxScope, why string) {
	what := "raise resources.disk to start it again"
	_, measured := r.Disk.Workspace(string(s.sbx.UID))
	switch {
	case r.Disk.OverInodes(s.sbx) && measured:
		what = inodesRemedy(r.Disk.MaxInodes)
	case !measured && s.sbx.Spec.Resources.Disk == nil:
		what = "delete the sandbox"
	case !measured:
		what = "remove resources.disk to start it again and delete what cannot be measured, or delete the sandbox"
	}
	writes.SetCondition(s.sbx, afev1.ContainerReadyCondition, false, afev1.DiskQuotaExceededReason,
		why+": the container was stopped and the workspace kept; "+what)
}

// inodesRemedy says how to start a sandbox stopped over its inode bound.
func inodesRemedy(maxInodes int64) string {
	if maxInodes > 0 {
		return fmt.Sprintf("raise resources.inodes (at most %d, the controller's --max-inodes) to start it again, or delete the sandbox", maxInodes)
	}
	return "raise resources.inodes to start it again, or delete the sandbox"
}

// overDiskRecheck is how often a claimed member kept stopped over its
// resources.disk, and not measured since this process started, is looked
// at again: the meter's first measurement decides.
const overDiskRecheck = 30 * time.Second

// stopClaimedOverDisk stops the claimed member of a sandbox that is over
// its resources.disk (why) and keeps it, stopped: removing it would leave
// its claim record binding nothing, and its workspace to the pool's sweep.
// The condition is committed before the stop, so that the reconcile the
// stop brings (or the next manager's) finds a stopped member it stopped,
// which it keeps (keptOverDisk), not a lost one, which it would release
// with its workspace. Whoever may write the status can forge that
// condition: it only keeps this sandbox's own member, verified by its
// record, stopped, or starts it again once it is measured under its limit.
func (r *Reconciler) stopClaimedOverDisk(ctx context.Context, s *sandboxScope, why string) (ctrl.Result, error) {
	c := s.claimed.container
	if !c.Running {
		// Kept stopped (keptOverDisk): over its limit still, or not
		// measured since this process started.
		if why != "" {
			r.overDiskCondition(s, why)
		}
		if !r.Disk.Measured(string(s.sbx.UID)) {
			return ctrl.Result{RequeueAfter: overDiskRecheck}, nil
		}
		return ctrl.Result{}, nil
	}
	logf.FromContext(ctx).Info("Stopping the sandbox: it is over resources.disk", "container", c.Name, "why", why)
	r.overDiskCondition(s, why)
	if err := r.commit(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	r.Stops.Stopping(c.ID, time.Now())
	if err := identity.IgnoreEngineNotFound(r.Engine.StopContainer(ctx, c.ID)); err != nil {
		return ctrl.Result{}, err
	}
	r.Recorder.Eventf(s.sbx, nil, corev1.EventTypeWarning, afev1.DiskQuotaExceededReason, "Stop",
		"%s; container %s, a member of pool %s, stopped", why, c.Name, s.sbx.Status.Pool)
	return ctrl.Result{}, nil
}

// keptOverDisk is true when the container bearing the sandbox's name is
// its claimed member (pool.Binds), stopped over its resources.disk (the
// condition written before the stop says so), and to stay stopped
// (heldOverDisk).
func (r *Reconciler) keptOverDisk(s *sandboxScope, v pool.ClaimView) bool {
	return stoppedOverDisk(s, v) && r.heldOverDisk(s.sbx)
}

// stoppedOverDisk is true when the sandbox's claimed member is stopped and
// the condition, written before the stop, says that it went over its
// resources.disk.
func stoppedOverDisk(s *sandboxScope, v pool.ClaimView) bool {
	c := meta.FindStatusCondition(s.sbx.Status.Conditions, afev1.ContainerReadyCondition)
	return c != nil && c.Reason == afev1.DiskQuotaExceededReason &&
		v.Named != nil && !v.Named.Running && pool.Binds(s.id, v.Record, v.Named)
}

// heldOverDisk is true while a sandbox stopped over its resources.disk (or
// its inode bound) is to stay stopped: measured over it, or not measured
// since this process started. Never without a bound, nor without a meter.
func (r *Reconciler) heldOverDisk(sbx *afev1.Sandbox) bool {
	if r.Disk == nil || !r.Disk.Bounds(sbx) {
		return false
	}
	if _, over := r.Disk.OverDisk(sbx); over {
		return true
	}
	return !r.Disk.Measured(string(sbx.UID))
}

// storageQuotaRefused handles the engine refusing a storage quota: the
// container is made again with a read-only root.
func (r *Reconciler) storageQuotaRefused(ctx context.Context, err error) (ctrl.Result, error) {
	if !errors.Is(err, docker.ErrStorageQuotaUnsupported) {
		return ctrl.Result{}, err
	}
	r.diskProbe().Refused(ctx)
	return ctrl.Result{RequeueAfter: writes.StaleRetry}, nil
}
