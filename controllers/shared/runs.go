package shared

import (
	"context"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/ticketspec"
)

// RunSandboxIndex indexes Runs by the Sandbox they name.
const RunSandboxIndex = "spec.sandboxRef.name"

// FinishingTicketsOf are the tickets, finished or being deleted, one of
// whose sandboxes the Run names.
func FinishingTicketsOf(ctx context.Context, c client.Reader, run *afev1.Run) ([]*afev1.Ticket, error) {
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
