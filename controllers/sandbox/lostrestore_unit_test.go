package sandbox

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// Only a sandbox made after its ticket's placement was lost, whose
// container never ran and whose workspace is not restored yet, looks for
// the ticket's snapshots.
func TestMadeAfterNodeLost(t *testing.T) {
	lostAt := metav1.NewTime(time.Date(2026, 12, 6, 22, 0, 0, 0, time.UTC))
	before, same, after := metav1.NewTime(lostAt.Add(-time.Second)), lostAt, metav1.NewTime(lostAt.Add(time.Second))
	ticket := func(reason string, at *metav1.Time) *afev1.Ticket {
		return &afev1.Ticket{Status: afev1.TicketStatus{LastRequeueReason: reason, LastRequeueTime: at}}
	}
	sandbox := func(created metav1.Time, edit func(*afev1.Sandbox)) *afev1.Sandbox {
		sbx := &afev1.Sandbox{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: created}}
		if edit != nil {
			edit(sbx)
		}
		return sbx
	}
	workspace := func(status metav1.ConditionStatus, reason string) func(*afev1.Sandbox) {
		return func(s *afev1.Sandbox) {
			s.Status.Conditions = []metav1.Condition{{Type: afev1.WorkspaceReadyCondition, Status: status, Reason: reason}}
		}
	}
	for _, tc := range []struct {
		name string
		sbx  *afev1.Sandbox
		tk   *afev1.Ticket
		want bool
	}{
		{"made after the loss", sandbox(after, nil), ticket(afev1.NodeLostReason, &lostAt), true},
		{"made in the second of the loss", sandbox(same, nil), ticket(afev1.NodeLostReason, &lostAt), true},
		{"made before the loss (not the ticket's new one)", sandbox(before, nil), ticket(afev1.NodeLostReason, &lostAt), false},
		{"no Ticket", sandbox(after, nil), nil, false},
		{"a ticket never lost", sandbox(after, nil), ticket("", nil), false},
		{"the last requeue is another", sandbox(after, nil), ticket(afev1.SandboxLostReason, &lostAt), false},
		{"a loss with no time", sandbox(after, nil), ticket(afev1.NodeLostReason, nil), false},
		{"its container ran", sandbox(after, func(s *afev1.Sandbox) { s.Status.ContainerID = "abc" }), ticket(afev1.NodeLostReason, &lostAt), false},
		{"a Folder workspace", sandbox(after, func(s *afev1.Sandbox) { s.Spec.Workspace.Type = afev1.WorkspaceFolder }), ticket(afev1.NodeLostReason, &lostAt), false},
		{"restored already", sandbox(after, workspace(metav1.ConditionTrue, afev1.RestoredFromSnapshotReason)), ticket(afev1.NodeLostReason, &lostAt), false},
		{"a restore that failed is tried again", sandbox(after, workspace(metav1.ConditionFalse, afev1.NodeLostReason)), ticket(afev1.NodeLostReason, &lostAt), true},
		{"a fresh workspace not run on yet", sandbox(after, workspace(metav1.ConditionTrue, afev1.ReadyReason)), ticket(afev1.NodeLostReason, &lostAt), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := madeAfterNodeLost(tc.sbx, tc.tk); got != tc.want {
				t.Errorf("madeAfterNodeLost = %v, want %v", got, tc.want)
			}
		})
	}
}
