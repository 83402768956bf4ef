package placement

// PodState is what a manager finds of a ticket's placeholder Pod.
type PodState int

const (
	// PodAbsent means: no Pod of that name.
	PodAbsent PodState = iota
	// PodForeign means: a Pod of that name the Ticket does not control.
	PodForeign
	// PodUnbound means: the ticket's Pod, not placed yet (or made by a
	// manager that has not signed it yet).
	PodUnbound
	// PodBound means: the ticket's Pod, bound to a node.
	PodBound
	// PodUnproven means: a Pod that names the Ticket as its controller but
	// no manager is shown to have made, or that kube-scheduler did not bind
	// as it was made (Check.State): its binding places nothing.
	PodUnproven
)

// Input is what a manager knows of a ticket when it decides.
type Input struct {
	// Me is this manager's node.
	Me string
	// Ended: the ticket is finished, past its deadline or being deleted.
	Ended bool
	// Deleting: the Ticket is being deleted.
	Deleting bool
	// CleanedUp: nothing of the ended ticket is left but the Ticket.
	CleanedUp bool
	// Pod and PodNode (when bound): the placeholder.
	Pod     PodState
	PodNode string
	// ReportedNode is status.node: where the ticket last ran.
	ReportedNode string
	// Folder: the ticket's workspace is a host folder, which cannot move.
	Folder bool
	// Movable: the ticket's sandboxes can follow it to another node with
	// their workspaces (Volume workspaces, and managers that reach each
	// other).
	Movable bool
	// NodeReady is true for a node that exists and is Ready.
	NodeReady func(node string) bool
}

// Action is what the manager does with the ticket.
type Action int

const (
	// Wait means: nothing here; another manager's ticket, or placement pending
	// on someone else.
	Wait Action = iota
	// Mine means: placed on this manager's node; reconcile it as one engine's.
	Mine
	// CreatePod means: make the placeholder.
	CreatePod
	// Pending means: the placeholder waits for kube-scheduler.
	Pending
	// Conflict means: a foreign Pod holds the placeholder's name.
	Conflict
	// Release means: the placement was lost: delete the ticket's Sandboxes, then
	// its Pod, so that it is placed anew.
	Release
	// Stuck means: placed on a lost node with a workspace that cannot move.
	Stuck
	// Replace means: a Pod that claims to be the placeholder is not shown to
	// be a manager's: delete it (that UID), so that the ticket's own is made.
	Replace
	// Move means: the placeholder was evicted or deleted while its node is
	// Ready: this manager, whose node it was, lets the Runs in flight end,
	// then has the ticket placed anew; the next node's manager takes the
	// workspaces from this one (NodeDrained).
	Move
)

// Decision is what to do, and for a release how.
type Decision struct {
	Action Action
	// Node is the node concerned (Release, Stuck, Mine).
	Node string
	// Requeue: the release interrupts live work and counts as a requeue
	// (reason NodeLost).
	Requeue bool
	// Strip: the node is lost: its manager cannot finish the deletion of
	// the Sandboxes, so their finalizers are removed for it (what it left
	// on its engine its sweep removes, should it come back).
	Strip bool
}

// Decide is the placement step of one manager for one ticket. Every
// manager decides alike from the same objects, so that exactly one of them
// acts on a placed ticket, and the steps any of them may take (creating the
// placeholder, releasing a lost placement) are idempotent.
func Decide(in Input) Decision {
	placed := ""
	switch in.Pod {
	case PodBound:
		placed = in.PodNode
	case PodAbsent, PodForeign, PodUnproven:
		placed = in.ReportedNode
	}
	if in.Pod == PodUnproven && !in.Ended {
		// Whoever made it, its binding is not the scheduler's placement
		// of this ticket: gone, it is handled as a deleted placeholder.
		return Decision{Action: Replace}
	}
	if in.Pod == PodForeign && placed == "" && !in.Ended {
		return Decision{Action: Conflict}
	}
	if placed == "" {
		switch {
		case in.Ended:
			// Never placed: nothing is on any engine; whoever sees it
			// finishes it.
			return Decision{Action: Mine}
		case in.Pod == PodAbsent:
			return Decision{Action: CreatePod}
		}
		return Decision{Action: Pending}
	}
	lost := !in.NodeReady(placed)
	switch {
	case lost && placed == in.Me:
		// The others release it; this manager keeps its hands off.
		return Decision{Action: Wait, Node: placed}
	case lost && in.Ended && in.CleanedUp && !in.Deleting:
		return Decision{Action: Wait, Node: placed}
	case lost && in.Folder && !in.Ended:
		return Decision{Action: Stuck, Node: placed}
	case lost:
		return Decision{Action: Release, Node: placed, Requeue: !in.Ended, Strip: true}
	case in.Pod == PodAbsent && !in.Ended && in.Movable && placed == in.Me:
		return Decision{Action: Move, Node: placed}
	case in.Pod == PodAbsent && !in.Ended && in.Movable:
		// The node it leaves moves it.
		return Decision{Action: Wait, Node: placed}
	case in.Pod != PodBound && !in.Ended:
		// Evicted or deleted (a foreign Pod in its place binds nothing):
		// placed anew once the node's manager has removed what it runs.
		return Decision{Action: Release, Node: placed, Requeue: true}
	case placed == in.Me:
		return Decision{Action: Mine, Node: placed}
	}
	return Decision{Action: Wait, Node: placed}
}
