package ticket

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/runrefs"
	"afe.dev/sandbox/internal/ticketspec"
)

// unfinishedRuns counts the Runs of the ticket's sandboxes not yet ended.
func (r *Reconciler) unfinishedRuns(ctx context.Context, tk *afev1.Ticket) (int, error) {
	return r.countRuns(ctx, tk, func(p afev1.RunPhase) bool { return !p.Terminal() })
}

// runsInFlight counts the Runs of the ticket's sandboxes that are executing.
func (r *Reconciler) runsInFlight(ctx context.Context, tk *afev1.Ticket) (int, error) {
	return r.countRuns(ctx, tk, func(p afev1.RunPhase) bool { return p == afev1.RunRunning })
}

// countRuns counts the Runs of the ticket's sandboxes whose phase counts.
func (r *Reconciler) countRuns(ctx context.Context, tk *afev1.Ticket, counts func(afev1.RunPhase) bool) (int, error) {
	n := 0
	for _, s := range ticketspec.Sandboxes(tk) {
		list := &afev1.RunList{}
		if err := r.List(ctx, list, client.InNamespace(tk.Namespace), client.MatchingFields{runrefs.SandboxIndex: s.Name}); err != nil {
			return 0, err
		}
		for i := range list.Items {
			if counts(list.Items[i].Status.Phase) {
				n++
			}
		}
	}
	return n, nil
}

// finishingTicketOfRun maps a Run to the finished or deleted ticket whose
// sandbox it names: that ticket's cleanup waits for the Run to end.
func (r *Reconciler) finishingTicketOfRun(ctx context.Context, o client.Object) []reconcile.Request {
	tickets, err := runrefs.FinishingTickets(ctx, r.Client, o.(*afev1.Run))
	if err != nil {
		logf.FromContext(ctx).Error(err, "List the tickets of a Run")
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(tickets))
	for _, tk := range tickets {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(tk)})
	}
	return reqs
}

// sandboxTicketIndex indexes Sandboxes by the UID of the Ticket that controls
// them.
const sandboxTicketIndex = "metadata.controllerTicketUID"

func (r *Reconciler) ownedSandboxes(ctx context.Context, tk *afev1.Ticket) ([]afev1.Sandbox, error) {
	list := &afev1.SandboxList{}
	if err := r.List(ctx, list, client.InNamespace(tk.Namespace), client.MatchingFields{sandboxTicketIndex: string(tk.UID)}); err != nil {
		return nil, err
	}
	var out []afev1.Sandbox
	for i := range list.Items {
		if ticketspec.OwnedBy(&list.Items[i], tk) {
			out = append(out, list.Items[i])
		}
	}
	return out, nil
}
