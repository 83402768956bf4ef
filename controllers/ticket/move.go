package ticket

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/controllers/writes"
	"afe.dev/sandbox/internal/metrics"
)

// A move (per-node mode, placement.Move): the ticket's placeholder was
// evicted or deleted (kubectl drain) while its node's manager runs. That
// manager, this one, lets the Runs in flight end (no new one starts: no
// node takes the ticket's sandboxes while it has no placeholder), counts
// the move, and makes a new placeholder, which kube-scheduler binds to
// another node (the drained one is cordoned). That node's manager takes
// each sandbox's workspace from this one over the managers' channel, and
// has this one remove its objects once the copy is verified
// (controllers/sandbox, move.go). The Sandboxes keep their UIDs.

// moveRetry is how often a move waiting for Runs in flight looks again.
const moveRetry = 2 * time.Second

// movingPrefix starts the Ready condition's message once the move is
// counted: a reconcile that finds it makes the placeholder without
// counting again.
const movingPrefix = "Moving from node "

// move carries out placement.Move for the ticket placed on node.
func (r *Reconciler) move(ctx context.Context, s *ticketScope, node string) (ctrl.Result, error) {
	tk := s.tk
	if c := meta.FindStatusCondition(tk.Status.Conditions, afev1.TicketReadyCondition); c != nil &&
		c.Reason == afev1.NodeDrainedReason && strings.HasPrefix(c.Message, movingPrefix+node+":") {
		// Counted: placed anew.
		return ctrl.Result{}, r.createPlaceholder(ctx, tk)
	}
	running, err := r.runsInFlight(ctx, tk)
	if err != nil {
		return ctrl.Result{}, err
	}
	if running > 0 {
		writes.SetCondition(tk, afev1.TicketReadyCondition, false, afev1.NodeDrainedReason, fmt.Sprintf(
			"The placeholder Pod on node %s was evicted or deleted: waiting for %d Run(s) in flight to end before the ticket moves with its workspace", node, running))
		return ctrl.Result{RequeueAfter: moveRetry}, nil
	}
	msg := movingPrefix + node + ": its placeholder Pod was evicted or deleted; the ticket's sandboxes follow it, with their workspaces, to where kube-scheduler places it next"
	tk.Status.Moves++
	tk.Status.Phase = afev1.TicketPending
	writes.SetCondition(tk, afev1.TicketReadyCondition, false, afev1.NodeDrainedReason, msg)
	s.moved = msg
	s.movedFrom = node
	logf.FromContext(ctx).Info("Moving the ticket off its node", "node", node)
	// The count is written before the placeholder is made: the next
	// reconcile makes it.
	return ctrl.Result{RequeueAfter: releaseRetry}, nil
}

// recordMove says, after the status write that counted it, that the ticket
// moves: an Event and afe_ticket_moves_total.
func (r *Reconciler) recordMove(s *ticketScope) {
	if s.moved == "" {
		return
	}
	r.Recorder.Eventf(s.tk, nil, corev1.EventTypeNormal, afev1.NodeDrainedReason, "Move", "%s", s.moved)
	metrics.TicketMoves.WithLabelValues(s.movedFrom).Inc()
	s.moved = ""
}
