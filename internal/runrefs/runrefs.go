// Package runrefs reads what a Run refers to across kinds: the field index
// of Runs by the Sandbox they name, which the Run, Sandbox and Ticket
// reconcilers list by, and the finishing tickets one of whose sandboxes a
// Run names.
package runrefs

import (
	"context"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/ticketspec"
)

// SandboxIndex indexes Runs by the Sandbox they name.
const SandboxIndex = "spec.sandboxRef.name"

// FinishingTickets are the tickets, finished or being deleted, one of
// whose sandboxes the Run names.
func FinishingTickets(ctx context.Context, c client.Reader, run *afev1.Run) ([]*afev1.Ticket, error) {
	list := &afev1.TicketList{}
	if err := c.List(ctx, list, client.InNamespace(run.Namespace)); err != nil {
		return nil, err
	}
	var out []*afev1.Ticket
	for i := range list.Items {
		tk := &list.Items[i]
		if !tk.Ended(time.Now()) && tk.DeletionTimestamp.IsZero() {
			continue
		}
		for _, s := range ticketspec.Sandboxes(tk) {
			if s.Name == run.Spec.SandboxRef.Name {
				out = append(out, tk)
				break
			}
		}
	}
	return out, nil
}
