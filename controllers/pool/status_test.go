package pool

import (
	"reflect"
	"testing"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

func TestTallyOf(t *testing.T) {
	nodes := func(n ...afev1.SandboxPoolNodeStatus) []afev1.SandboxPoolNodeStatus { return n }
	entry := func(node string, replicas, ready int32) afev1.SandboxPoolNodeStatus {
		return afev1.SandboxPoolNodeStatus{Node: node, Replicas: replicas, ReadyReplicas: ready}
	}
	for name, c := range map[string]struct {
		have      []afev1.SandboxPoolNodeStatus
		node      string
		replicas  int
		ready     int
		want      int
		wantNodes []afev1.SandboxPoolNodeStatus
		wantTally tally
	}{
		"one engine: its own counts, no nodes (an entry left from per-node mode goes)": {
			have: nodes(entry("n1", 2, 2)), replicas: 3, ready: 2, want: 3,
			wantTally: tally{replicas: 3, ready: 2, want: 3},
		},
		"the first node to report": {
			node: "n2", replicas: 2, ready: 1, want: 2,
			wantNodes: nodes(entry("n2", 2, 1)),
			wantTally: tally{replicas: 2, ready: 1, want: 2, short: []string{"n2"}},
		},
		"a node adds its entry in order, and the sums count every node's": {
			have: nodes(entry("n1", 2, 2), entry("n3", 1, 0)), node: "n2", replicas: 2, ready: 2, want: 2,
			wantNodes: nodes(entry("n1", 2, 2), entry("n2", 2, 2), entry("n3", 1, 0)),
			wantTally: tally{replicas: 5, ready: 4, want: 6, short: []string{"n3"}},
		},
		"a node replaces only its own entry": {
			have: nodes(entry("n1", 2, 2), entry("n2", 9, 9)), node: "n2", replicas: 1, ready: 1, want: 2,
			wantNodes: nodes(entry("n1", 2, 2), entry("n2", 1, 1)),
			wantTally: tally{replicas: 3, ready: 3, want: 4, short: []string{"n2"}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			st := &afev1.SandboxPoolStatus{Nodes: c.have}
			got := tallyOf(st, c.node, c.replicas, c.ready, c.want)
			if !reflect.DeepEqual(got, c.wantTally) {
				t.Errorf("tally %+v, want %+v", got, c.wantTally)
			}
			if !reflect.DeepEqual(st.Nodes, c.wantNodes) {
				t.Errorf("nodes %+v, want %+v", st.Nodes, c.wantNodes)
			}
		})
	}
}
