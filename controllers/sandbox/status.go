package sandbox

import (
	"context"
	"strconv"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/controllers/writes"
	"afe.dev/sandbox/internal/metrics"
	"afe.dev/sandbox/internal/status"
)

// commit summarises the conditions and writes the status once, only
// when it changed, and only over the version it read: a reconcile that
// started from a stale cache must not overwrite what a newer one wrote (the
// time to Ready, for one). The metrics follow the write that states them.
func (r *Reconciler) commit(ctx context.Context, s *sandboxScope) error {
	sbx, before := s.sbx, s.before
	deleting := !sbx.DeletionTimestamp.IsZero()
	if deleting && !controllerutil.ContainsFinalizer(sbx, afev1.SandboxFinalizer) {
		return nil // gone, or about to be
	}
	if !deleting {
		r.recordNode(ctx, s)
	}
	now := metav1.Now()
	status.SummarizeSandbox(&sbx.Status, sbx.Generation, deleting, now)
	written, err := writes.PatchStatus(ctx, r.Client, before, sbx, afev1.SandboxFinalizer,
		func(o *afev1.Sandbox) any { return o.Status })
	if !written {
		return err
	}
	r.mem.written.record(sbx.UID, sbx.Status.ContainerID)
	observeReady(before, sbx, now)
	r.observeSuspension(s, before)
	if lost := sbx.Status.Recreations - before.Status.Recreations; lost > 0 {
		metrics.Recreations.WithLabelValues("lost").Add(float64(lost))
	}
	s.before = sbx.DeepCopy()
	return nil
}

// observeReady records the time to Ready of a new sandbox, and from a loss
// to its replacement.
func observeReady(before, sbx *afev1.Sandbox, now metav1.Time) {
	if meta.IsStatusConditionTrue(before.Status.Conditions, afev1.SandboxReadyCondition) ||
		!meta.IsStatusConditionTrue(sbx.Status.Conditions, afev1.SandboxReadyCondition) {
		return
	}
	switch {
	case before.Status.ReadyTime == nil:
		metrics.SandboxReady.WithLabelValues(strconv.FormatBool(len(sbx.Spec.Egress) > 0)).
			Observe(now.Sub(sbx.CreationTimestamp.Time).Seconds())
	case lossRecorded(before) && sbx.Status.LastLostTime != nil:
		// Not by comparing LastLostTime with ReadyTime: both are kept to
		// the second, and a loss in the second the sandbox became Ready
		// would not count.
		metrics.SandboxRecovered.Observe(now.Sub(sbx.Status.LastLostTime.Time).Seconds())
	}
}
