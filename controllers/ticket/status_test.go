package ticket

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/controllers/writes"
)

func TestFirstStatusWait(t *testing.T) {
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ticket := func(reason string, opts ...func(*afev1.Ticket)) *afev1.Ticket {
		tk := &afev1.Ticket{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(created)}}
		if reason != "" {
			writes.SetCondition(tk, afev1.TicketReadyCondition, reason == afev1.ReadyReason, reason, "")
		}
		for _, o := range opts {
			o(tk)
		}
		return tk
	}
	failed := func(tk *afev1.Ticket) {
		writes.SetCondition(tk, afev1.TicketFailedCondition, true, afev1.DeadlineExceededReason, "")
	}
	tests := map[string]struct {
		before, now *afev1.Ticket
		requeued    string
		owned       []afev1.Sandbox
		at          time.Duration // after the creation
		want        time.Duration
	}{
		"new, not Ready yet: held": {before: ticket(""), now: ticket(afev1.SandboxesNotReadyReason), at: 300 * time.Millisecond, want: 4700 * time.Millisecond},
		"new, not Ready after the delay": {before: ticket(""), now: ticket(afev1.SandboxesNotReadyReason), at: 6 * time.Second,
			owned: []afev1.Sandbox{{Status: afev1.SandboxStatus{Phase: afev1.SandboxProvisioning}}}},
		"new, no sandbox yet after the delay": {before: ticket(""), now: ticket(afev1.SandboxesNotReadyReason), at: 6 * time.Second},
		"new, every sandbox on its first creation, after the delay: written": {before: ticket(""), now: ticket(afev1.SandboxesNotReadyReason),
			at: 6 * time.Second, owned: []afev1.Sandbox{{}, {}}},
		"new, a sandbox failed: written": {before: ticket(""), now: ticket(afev1.SandboxesNotReadyReason),
			owned: []afev1.Sandbox{{Status: afev1.SandboxStatus{Phase: afev1.SandboxFailed}}}},
		"new and Ready: written":              {before: ticket(""), now: ticket(afev1.ReadyReason)},
		"new, a conflict: written":            {before: ticket(""), now: ticket(afev1.SandboxConflictReason)},
		"new, paused: written":                {before: ticket(""), now: ticket(afev1.PausedReason)},
		"new, a loss to report: written":      {before: ticket(""), now: ticket(afev1.SandboxesNotReadyReason), requeued: "s"},
		"new, failed: written":                {before: ticket(""), now: ticket(afev1.SandboxesNotReadyReason, failed)},
		"new, placed on a node: written":      {before: ticket(""), now: ticket(afev1.SandboxesNotReadyReason, func(tk *afev1.Ticket) { tk.Status.Node = "n1" })},
		"stated before: every change written": {before: ticket(afev1.ReadyReason), now: ticket(afev1.SandboxesNotReadyReason)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := &ticketScope{before: tc.before, tk: tc.now, requeued: tc.requeued, owned: tc.owned}
			if got := s.firstStatusWait(created.Add(tc.at)); got != tc.want {
				t.Errorf("firstStatusWait() = %v, want %v", got, tc.want)
			}
		})
	}
}
