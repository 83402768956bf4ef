package move

import (
	"context"
	"errors"
	"io"
	"time"

	"k8s.io/apimachinery/pkg/types"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// Mover is the channel between the managers of per-node mode that a
// moved ticket's workspaces go through (NodeDrained): the move routes on
// the access API's peer listener, mutually authenticated with the
// managers' CA (Client asks them, Handler serves them). A manager
// answers for a sandbox of that namespace, name and UID only, and gives
// its workspace or its Runs' logs only to the manager of the node the
// sandbox's ticket is placed on now.
type Mover interface {
	// Workspace streams the sandbox's workspace from node's manager,
	// which first stops the sandbox's container there.
	Workspace(ctx context.Context, node string, sbx *afev1.Sandbox) (*Workspace, error)
	// RunLogs copies the logs node's manager keeps of the sandbox's Runs
	// runs into this manager's Run log store.
	RunLogs(ctx context.Context, node string, sbx *afev1.Sandbox, runs []types.UID) error
	// Live is true when node's manager runs and answers the others (its
	// peer Lease is renewed): a ticket whose placeholder goes while it
	// does not is released, not moved.
	Live(ctx context.Context, node string) bool
	// Holds is true when node's manager runs the sandbox: its container,
	// of this UID, running on its engine, with its workspace.
	Holds(ctx context.Context, node string, sbx *afev1.Sandbox) (bool, error)
	// Snapshots lists the snapshot volumes every other running node's
	// manager keeps of the sandbox's ticket under the sandbox's name (a
	// ticket made afresh after its node was lost restores the newest);
	// unanswered names the managers that did not answer.
	Snapshots(ctx context.Context, sbx *afev1.Sandbox) (found []PeerSnapshot, unanswered error)
	// Snapshot streams one of them from node's manager.
	Snapshot(ctx context.Context, node string, sbx *afev1.Sandbox, volume string) (*Workspace, error)
}

// PeerSnapshot is a snapshot volume of a ticket's sandbox on a node's
// engine.
type PeerSnapshot struct {
	Node, Volume string
	// Created is when that engine made the volume.
	Created time.Time
}

// NewestSnapshot is the most recent of the snapshots (the first by node
// and name among those made at the same time); false when there are none.
func NewestSnapshot(found []PeerSnapshot) (PeerSnapshot, bool) {
	var best PeerSnapshot
	for i, s := range found {
		if i == 0 || s.Created.After(best.Created) ||
			s.Created.Equal(best.Created) && (s.Node < best.Node || s.Node == best.Node && s.Volume < best.Volume) {
			best = s
		}
	}
	return best, len(found) > 0
}

// Workspace is a workspace on its way from another node.
type Workspace struct {
	// Tree is a tar whose entries are under workspace/.
	Tree io.ReadCloser
	// User is the uid:gid the workspace's files belonged to there (its
	// sandbox's user on that node); empty when it is not known.
	User string
	// Verify, once Tree was read to its end, is nil when the tree arrived
	// whole: its size and SHA-256, as the sending manager counted them,
	// are those read.
	Verify func() error
}

// ErrNothingToMove is the answer of a node's manager that has no workspace
// of the sandbox (it was lost there, or already moved).
var ErrNothingToMove = errors.New("no workspace of the sandbox on that node")

// ErrUnavailable is a node's manager that does not answer.
var ErrUnavailable = errors.New("the manager of that node does not answer")
