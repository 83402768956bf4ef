package run

import (
	"context"
	"fmt"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/controllers/writes"
	"afe.dev/sandbox/internal/runrefs"
)

// slotRetry is how often a Run waiting for a slot looks again, besides the
// nudge it gets when another Run of its sandbox ends.
const slotRetry = 5 * time.Second

// admit reserves one of the sandbox's slots for the Run, or refuses: at most
// limit attempts run in one sandbox at once, and the Runs that wait start in
// the order they were created. A reservation is an attempt that has not
// started yet; start replaces it, or forgets it when it cannot start.
func (e *executions) admit(run *afev1.Run, sandbox types.UID, limit int, queue []types.UID) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	busy := 0
	for _, a := range e.attempts {
		if a.sandbox == sandbox && !a.done.Load() {
			busy++
		}
	}
	ahead := 0
	for _, uid := range queue {
		if uid == run.UID {
			break
		}
		if _, ok := e.attempts[uid]; !ok {
			ahead++ // waits too, and came first
		}
	}
	if busy+ahead >= limit {
		return false
	}
	e.attempts[run.UID] = &attempt{sandbox: sandbox}
	return true
}

// queueOf lists the unfinished Runs of the sandbox, oldest first.
func (r *Reconciler) queueOf(ctx context.Context, run *afev1.Run) ([]types.UID, error) {
	list := &afev1.RunList{}
	if err := r.List(ctx, list, client.InNamespace(run.Namespace), client.MatchingFields{runrefs.SandboxIndex: run.Spec.SandboxRef.Name}); err != nil {
		return nil, err
	}
	items := list.Items[:0]
	for _, it := range list.Items {
		if !it.Status.Phase.Terminal() && it.DeletionTimestamp.IsZero() {
			items = append(items, it)
		}
	}
	sort.Slice(items, func(i, j int) bool {
		ti, tj := items[i].CreationTimestamp, items[j].CreationTimestamp
		if !ti.Equal(&tj) {
			return ti.Before(&tj)
		}
		return items[i].Name < items[j].Name
	})
	out := make([]types.UID, 0, len(items))
	for _, it := range items {
		out = append(out, it.UID)
	}
	return out, nil
}

// nudgeWaiting queues the other unfinished Runs of the Run's sandbox: one
// of them may start now. The nudge is best effort (slotRetry is the
// fallback).
func (r *Reconciler) nudgeWaiting(ctx context.Context, run *afev1.Run) {
	sbx := &afev1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: run.Namespace, Name: run.Spec.SandboxRef.Name}}
	for _, req := range r.runsOfSandbox(ctx, sbx) {
		if req.Name == run.Name {
			continue
		}
		if !r.execs.nudge(&afev1.Run{ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: req.Name}}) {
			return
		}
	}
}

// waitForSlot keeps the Run Pending until a slot of its sandbox is free.
func (r *Reconciler) waitForSlot(s *runScope, limit int) {
	run := s.run
	run.Status.Phase = afev1.RunPending
	writes.SetCondition(run, afev1.RunSandboxReadyCondition, true, afev1.RunLimitReachedReason,
		fmt.Sprintf("Sandbox %s runs %d Runs, the controller's --max-runs-per-sandbox; this Run starts when one ends, in the order the Runs were created",
			run.Spec.SandboxRef.Name, limit))
	writes.SetCondition(run, afev1.RunCompletedCondition, false, afev1.RunLimitReachedReason, "Waiting for a slot of the sandbox")
	s.requeue = slotRetry
}
