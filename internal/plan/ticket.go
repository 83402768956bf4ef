package plan

import afev1 "afe.dev/sandbox/api/v1alpha1"

// TicketStep is what a ticket's reconcile does.
type TicketStep string

const (
	// TicketDelete is the step of a ticket being deleted: everything of it
	// is removed, then its finalizer.
	TicketDelete TicketStep = "Delete"
	// TicketCleanUp is the step of a finished ticket: everything of it is
	// removed.
	TicketCleanUp TicketStep = "CleanUp"
	// TicketKeep is the step of a paused ticket: its sandboxes are kept as
	// they are, so that it finds its containers again.
	TicketKeep TicketStep = "Keep"
	// TicketProvision is the step of an active ticket: its sandboxes are
	// made and kept to its template, those it no longer needs deleted.
	TicketProvision TicketStep = "Provision"
)

// Ticket is the step for a ticket being deleted or not, in its state, past
// its deadline or not.
func Ticket(deleting bool, state afev1.TicketState, deadlineExceeded bool) TicketStep {
	switch {
	case deleting:
		return TicketDelete
	case state.Terminal() || deadlineExceeded:
		return TicketCleanUp
	case state == afev1.TicketPaused:
		return TicketKeep
	}
	return TicketProvision
}
