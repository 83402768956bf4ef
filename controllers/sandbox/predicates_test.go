package sandbox

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/controllers/writes"
)

// A status-only update is reconciled at once when it may be forged, so the
// status is written again without waiting for the sweep; the controller's
// own condition updates are not.
func TestSpecOrDeletionChangedPassesForgeries(t *testing.T) {
	key := "ns.a"
	own := afev1.SandboxStatus{ContainerName: "afe-" + key, ContainerID: "c1", VolumeName: "afe-" + key + "_ws"}
	tests := map[string]struct {
		status afev1.SandboxStatus
		// wrote is the container ID the manager last wrote, if any.
		wrote string
		pass  bool
	}{
		"conditions only":     {status: func() afev1.SandboxStatus { s := own; s.Phase = afev1.SandboxReady; return s }(), pass: false},
		"another's container": {status: func() afev1.SandboxStatus { s := own; s.ContainerName = "afe-victim.v"; return s }(), pass: true},
		"another's volume":    {status: func() afev1.SandboxStatus { s := own; s.VolumeName = "afe-victim.v_ws"; return s }(), pass: true},
		"another's network":   {status: func() afev1.SandboxStatus { s := own; s.NetworkName = "bridge"; return s }(), pass: true},
		"a changed ID":        {status: func() afev1.SandboxStatus { s := own; s.ContainerID = "c2"; return s }(), pass: true},
		"the manager's own new ID": {status: func() afev1.SandboxStatus { s := own; s.ContainerID = "c2"; return s }(),
			wrote: "c2", pass: false},
		"an ID other than the manager wrote": {status: func() afev1.SandboxStatus { s := own; s.ContainerID = "c3"; return s }(),
			wrote: "c2", pass: true},
		// The node a ticket moved off removes what it ran (move.go).
		"another node": {status: func() afev1.SandboxStatus { s := own; s.Node = "node-b"; return s }(), pass: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			meta := metav1.ObjectMeta{Namespace: "ns", Name: "a", UID: "a", Generation: 1}
			old := &afev1.Sandbox{ObjectMeta: meta, Status: own}
			updated := &afev1.Sandbox{ObjectMeta: meta, Status: tc.status}
			var written writtenIDs
			if tc.wrote != "" {
				written.record(meta.UID, tc.wrote)
			}
			got := writes.SpecOrDeletionChanged(statusForgeable(&written)).Update(event.UpdateEvent{ObjectOld: old, ObjectNew: updated})
			if got != tc.pass {
				t.Errorf("Update passes = %v, want %v", got, tc.pass)
			}
		})
	}
}
