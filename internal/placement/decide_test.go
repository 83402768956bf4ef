package placement

import "testing"

func TestDecide(t *testing.T) {
	ready := func(nodes ...string) func(string) bool {
		return func(n string) bool {
			for _, r := range nodes {
				if r == n {
					return true
				}
			}
			return false
		}
	}
	tests := []struct {
		name string
		in   Input
		want Decision
	}{
		{"new ticket: make the placeholder",
			Input{Me: "a", Pod: PodAbsent, NodeReady: ready("a", "b")}, Decision{Action: CreatePod}},
		{"placeholder not bound yet",
			Input{Me: "a", Pod: PodUnbound, NodeReady: ready("a", "b")}, Decision{Action: Pending}},
		{"a foreign Pod holds the name",
			Input{Me: "a", Pod: PodForeign, NodeReady: ready("a")}, Decision{Action: Conflict}},
		{"a foreign Pod does not place the ticket on its node",
			Input{Me: "b", Pod: PodForeign, PodNode: "b", NodeReady: ready("a", "b")}, Decision{Action: Conflict}},
		{"bound here",
			Input{Me: "a", Pod: PodBound, PodNode: "a", NodeReady: ready("a", "b")}, Decision{Action: Mine, Node: "a"}},
		{"bound elsewhere",
			Input{Me: "a", Pod: PodBound, PodNode: "b", NodeReady: ready("a", "b")}, Decision{Action: Wait, Node: "b"}},
		{"status.node alone does not place a ticket whose Pod is bound",
			Input{Me: "a", Pod: PodBound, PodNode: "b", ReportedNode: "a", NodeReady: ready("a", "b")}, Decision{Action: Wait, Node: "b"}},
		{"bound to a node gone NotReady: released by the others",
			Input{Me: "a", Pod: PodBound, PodNode: "b", NodeReady: ready("a")}, Decision{Action: Release, Node: "b", Requeue: true, Strip: true}},
		{"the lost node's own manager keeps its hands off",
			Input{Me: "b", Pod: PodBound, PodNode: "b", NodeReady: ready("a")}, Decision{Action: Wait, Node: "b"}},
		{"a Folder workspace on a lost node waits for it",
			Input{Me: "a", Pod: PodBound, PodNode: "b", Folder: true, NodeReady: ready("a")}, Decision{Action: Stuck, Node: "b"}},
		{"placeholder deleted on a live node: released, finalizers left to its manager",
			Input{Me: "a", Pod: PodAbsent, ReportedNode: "b", NodeReady: ready("a", "b")}, Decision{Action: Release, Node: "b", Requeue: true}},
		{"a foreign Pod in place of a deleted placeholder: released, not kept",
			Input{Me: "b", Pod: PodForeign, PodNode: "b", ReportedNode: "b", NodeReady: ready("a", "b")}, Decision{Action: Release, Node: "b", Requeue: true}},
		{"own placeholder deleted",
			Input{Me: "b", Pod: PodAbsent, ReportedNode: "b", NodeReady: ready("a", "b")}, Decision{Action: Release, Node: "b", Requeue: true}},
		{"drained: the node it leaves moves it",
			Input{Me: "b", Pod: PodAbsent, ReportedNode: "b", Movable: true, NodeReady: ready("a", "b")}, Decision{Action: Move, Node: "b"}},
		{"drained: the other managers leave the move to the node it leaves",
			Input{Me: "a", Pod: PodAbsent, ReportedNode: "b", Movable: true, NodeReady: ready("a", "b")}, Decision{Action: Wait, Node: "b"}},
		{"drained, the new placeholder not bound yet",
			Input{Me: "b", Pod: PodUnbound, ReportedNode: "b", Movable: true, NodeReady: ready("a", "b")}, Decision{Action: Pending}},
		{"drained, the new placeholder bound: the new node's",
			Input{Me: "a", Pod: PodBound, PodNode: "a", ReportedNode: "b", Movable: true, NodeReady: ready("a", "b")}, Decision{Action: Mine, Node: "a"}},
		{"a movable ticket on a lost node is released: nothing answers there",
			Input{Me: "a", Pod: PodAbsent, ReportedNode: "b", Movable: true, NodeReady: ready("a")}, Decision{Action: Release, Node: "b", Requeue: true, Strip: true}},
		{"a foreign Pod in place of a movable ticket's placeholder: released",
			Input{Me: "b", Pod: PodForeign, PodNode: "b", ReportedNode: "b", Movable: true, NodeReady: ready("a", "b")}, Decision{Action: Release, Node: "b", Requeue: true}},
		{"an ended movable ticket is not moved",
			Input{Me: "b", Ended: true, Pod: PodAbsent, ReportedNode: "b", Movable: true, NodeReady: ready("a", "b")}, Decision{Action: Mine, Node: "b"}},
		{"ended, placeholder removed after the cleanup: its node's",
			Input{Me: "b", Ended: true, Pod: PodAbsent, ReportedNode: "b", NodeReady: ready("a", "b")}, Decision{Action: Mine, Node: "b"}},
		{"ended elsewhere",
			Input{Me: "a", Ended: true, Pod: PodBound, PodNode: "b", NodeReady: ready("a", "b")}, Decision{Action: Wait, Node: "b"}},
		{"ended on a lost node: released without a requeue",
			Input{Me: "a", Ended: true, Pod: PodBound, PodNode: "b", NodeReady: ready("a")}, Decision{Action: Release, Node: "b", Strip: true}},
		{"ended with a Folder workspace on a lost node: released",
			Input{Me: "a", Ended: true, Folder: true, Pod: PodBound, PodNode: "b", NodeReady: ready("a")}, Decision{Action: Release, Node: "b", Strip: true}},
		{"cleaned up on a node lost since: kept as it is",
			Input{Me: "a", Ended: true, CleanedUp: true, Pod: PodAbsent, ReportedNode: "b", NodeReady: ready("a")}, Decision{Action: Wait, Node: "b"}},
		{"cleaned up on a lost node, then deleted: released",
			Input{Me: "a", Ended: true, CleanedUp: true, Deleting: true, Pod: PodAbsent, ReportedNode: "b", NodeReady: ready("a")}, Decision{Action: Release, Node: "b", Strip: true}},
		{"ended before it was placed: anyone finishes it",
			Input{Me: "a", Ended: true, Pod: PodUnbound, NodeReady: ready("a")}, Decision{Action: Mine}},
		{"a Pod no manager signed, bound by hand: replaced, never placed there",
			Input{Me: "b", Pod: PodUnproven, PodNode: "b", NodeReady: ready("a", "b")}, Decision{Action: Replace}},
		{"an unproven Pod in place of a placed ticket's placeholder: replaced",
			Input{Me: "a", Pod: PodUnproven, PodNode: "a", ReportedNode: "b", Movable: true, NodeReady: ready("a", "b")}, Decision{Action: Replace}},
		{"an unproven Pod does not keep a lost node's ticket",
			Input{Me: "a", Pod: PodUnproven, PodNode: "b", ReportedNode: "b", NodeReady: ready("a")}, Decision{Action: Replace}},
		{"ended behind an unproven Pod: finished where it ran",
			Input{Me: "b", Ended: true, Pod: PodUnproven, PodNode: "a", ReportedNode: "b", NodeReady: ready("a", "b")}, Decision{Action: Mine, Node: "b"}},
		{"ended behind an unproven Pod, never placed: anyone finishes it",
			Input{Me: "a", Ended: true, Pod: PodUnproven, PodNode: "a", NodeReady: ready("a")}, Decision{Action: Mine}},
		{"ended before it was placed, behind a foreign Pod",
			Input{Me: "a", Ended: true, Pod: PodForeign, NodeReady: ready("a")}, Decision{Action: Mine}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Decide(tt.in); got != tt.want {
				t.Fatalf("Decide = %+v, want %+v", got, tt.want)
			}
		})
	}
}
