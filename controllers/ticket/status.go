package ticket

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/controllers/writes"
	"afe.dev/sandbox/internal/metrics"
)

// observeSandboxes lists the Sandboxes the ticket owns and counts their
// losses as the ticket's requeues.
func (r *Reconciler) observeSandboxes(ctx context.Context, s *ticketScope) error {
	owned, err := r.ownedSandboxes(ctx, s.tk)
	if err != nil {
		return err
	}
	s.owned = owned
	if lost := recordRequeues(s.tk, owned); lost != "" {
		s.requeued = lost
	}
	return nil
}

// recordRequeues states the sandboxes' recreations as the ticket's
// requeues in its status (their count, last time and reason, and the
// Requeued condition), and returns the sandbox lost last when there are
// new ones, for the Event that follows the write.
func recordRequeues(tk *afev1.Ticket, owned []afev1.Sandbox) string {
	sum, last, lost := lossesOf(owned)
	delta := sum - tk.Status.ObservedRecreations
	if delta > 0 {
		tk.Status.Requeues += delta
		tk.Status.LastRequeueTime = last
		tk.Status.LastRequeueReason = afev1.SandboxLostReason
		writes.SetCondition(tk, afev1.TicketRequeuedCondition, true, afev1.SandboxLostReason,
			fmt.Sprintf("Sandbox %s was lost and recreated with a fresh workspace; the step in flight was interrupted", lost))
	}
	tk.Status.ObservedRecreations = sum
	if meta.FindStatusCondition(tk.Status.Conditions, afev1.TicketRequeuedCondition) == nil {
		writes.SetCondition(tk, afev1.TicketRequeuedCondition, false, afev1.NoLossReason, "No sandbox of the ticket was lost")
	}
	if delta <= 0 {
		return ""
	}
	return lost
}

// firstStatusDelay is how long a new ticket's first status write waits
// for its sandboxes to be Ready: a ticket served in less (from a warm pool,
// a cold start, most of a burst of 20 here) writes one status, Ready,
// instead of two, on the path a burst of tickets waits on. Until then its
// Sandboxes' own status says how they are doing.
const firstStatusDelay = 5 * time.Second

// firstStatusWait is how much longer the reconcile may leave the status
// unwritten: while the ticket has never stated Ready, states now only that
// its sandboxes are not Ready yet, none of them failed, has no loss or new
// node to report, and was created less than firstStatusDelay ago: never
// longer, so that a user who looks at a new ticket sees a status within
// seconds, however slow its sandboxes are. Every other status is written
// at once.
func (s *ticketScope) firstStatusWait(now time.Time) time.Duration {
	failed := slices.ContainsFunc(s.owned, func(o afev1.Sandbox) bool { return o.Status.Phase == afev1.SandboxFailed })
	// A node newly placed on is stated at once: placement reads it back.
	if failed || s.requeued != "" || s.nodeLost != "" || s.tk.Status.Node != s.before.Status.Node ||
		meta.FindStatusCondition(s.before.Status.Conditions, afev1.TicketReadyCondition) != nil ||
		meta.IsStatusConditionTrue(s.tk.Status.Conditions, afev1.TicketFailedCondition) {
		return 0
	}
	c := meta.FindStatusCondition(s.tk.Status.Conditions, afev1.TicketReadyCondition)
	if c == nil || c.Reason != afev1.SandboxesNotReadyReason {
		return 0
	}
	return max(0, s.tk.CreationTimestamp.Add(firstStatusDelay).Sub(now))
}

// commit writes the status once, only when it changed, and only over
// the version it read: the lock refuses a write based on a stale copy, so
// that what follows a write (the cleanup's metric and Event) happens once.
func (r *Reconciler) commit(ctx context.Context, s *ticketScope) error {
	written, err := writes.PatchStatus(ctx, r.Client, s.before, s.tk, afev1.TicketFinalizer,
		func(o *afev1.Ticket) any { return o.Status })
	if !written {
		return err
	}
	// A patch the server found empty leaves the version as it was: that
	// copy is not stale.
	if s.tk.ResourceVersion != s.before.ResourceVersion {
		r.written.Replaced(s.tk.UID, s.before.ResourceVersion)
	}
	// No Event when a cleanup ends: the CleanedUp condition says it.
	observeCleanup(s.before, s.tk)
	if s.requeued != "" {
		r.Recorder.Eventf(s.tk, nil, corev1.EventTypeWarning, afev1.SandboxLostReason, "Requeue",
			"Sandbox %s was lost and recreated with a fresh workspace; requeue the interrupted step", s.requeued)
		s.requeued = ""
	}
	r.recordMove(s)
	if s.nodeLost != "" {
		r.Recorder.Eventf(s.tk, nil, corev1.EventTypeWarning, afev1.NodeLostReason, "Requeue", "%s", s.nodeLost)
		s.nodeLost = ""
	}
	if !meta.IsStatusConditionTrue(s.before.Status.Conditions, afev1.TicketFailedCondition) &&
		meta.IsStatusConditionTrue(s.tk.Status.Conditions, afev1.TicketFailedCondition) {
		r.Recorder.Eventf(s.tk, nil, corev1.EventTypeWarning, afev1.DeadlineExceededReason, "Fail",
			"The ticket ran past spec.lifecycle.activeDeadlineSeconds (%ds) and ended Failed; its sandboxes are removed",
			s.tk.Spec.Lifecycle.ActiveDeadlineSeconds)
	}
	s.before = s.tk.DeepCopy()
	return nil
}

// observeCleanup records, after the write that states it, a cleanup that
// has just ended: its time since it began (the condition went False), or
// none when it took a single reconcile. It tells whether one ended.
func observeCleanup(before, tk *afev1.Ticket) bool {
	if meta.IsStatusConditionTrue(before.Status.Conditions, afev1.TicketCleanedUpCondition) ||
		!meta.IsStatusConditionTrue(tk.Status.Conditions, afev1.TicketCleanedUpCondition) {
		return false
	}
	started := time.Now()
	if c := meta.FindStatusCondition(before.Status.Conditions, afev1.TicketCleanedUpCondition); c != nil {
		started = c.LastTransitionTime.Time
	}
	metrics.TicketCleanup.Observe(time.Since(started).Seconds())
	return true
}

// lossesOf sums the sandboxes' recreations and names the one lost last,
// with the time.
func lossesOf(owned []afev1.Sandbox) (sum int32, last *metav1.Time, lost string) {
	for i := range owned {
		st := owned[i].Status
		sum += st.Recreations
		if st.LastLostTime != nil && (last == nil || last.Before(st.LastLostTime)) {
			last, lost = st.LastLostTime, owned[i].Name
		}
	}
	return sum, last, lost
}
