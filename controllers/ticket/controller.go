// Package ticket drives a Ticket's Sandboxes through its life (create,
// update, pause, clean up), and in per-node mode its placement. It holds no
// engine: what is left on the engine after its Sandboxes is the sweeper's
// (Leftovers).
package ticket

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/controllers/config"
	"afe.dev/sandbox/controllers/writes"
	"afe.dev/sandbox/internal/plan"
	"afe.dev/sandbox/internal/status"
	"afe.dev/sandbox/internal/ticketspec"
)

// Reconciler drives a ticket's sandboxes through its life.
type Reconciler struct {
	client.Client
	// APIReader reads past the cache (the placeholder Pods, in per-node
	// mode).
	APIReader client.Reader
	Recorder  events.EventRecorder
	Options   config.Options
	// Leftovers removes the Docker objects of a finished ticket that no
	// Sandbox owns.
	Leftovers Leftovers

	// written tells a cached ticket older than this process's last write
	// of it, and a Sandbox it created that the cache does not hold yet.
	written writes.Written
}

// Leftovers is what the ticket asks of the engine once its Sandboxes are
// gone: the sweeper's.
type Leftovers interface {
	// SweepTicket removes the ticket's Docker objects no Sandbox owns,
	// snapshots included unless the ticket retains them, and lists the
	// snapshot volumes it keeps.
	SweepTicket(ctx context.Context, tk *afev1.Ticket) ([]string, error)
}

// +kubebuilder:rbac:groups=sandbox.afe.dev,resources=tickets,verbs=get;list;watch;update;patch;delete
// +kubebuilder:rbac:groups=sandbox.afe.dev,resources=tickets/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=sandbox.afe.dev,resources=tickets/finalizers,verbs=update
// +kubebuilder:rbac:groups=sandbox.afe.dev,resources=sandboxes,verbs=create;delete
// +kubebuilder:rbac:groups=sandbox.afe.dev,resources=runs,verbs=list;watch

// ticketScope is what one reconcile of a ticket works with.
type ticketScope struct {
	tk *afev1.Ticket
	// before is the Ticket as last written, the base of status patches.
	before *afev1.Ticket
	// owned are the Sandboxes the ticket controls.
	owned []afev1.Sandbox
	// requeued names the lost sandbox of a requeue not yet written; its
	// Event follows the write, so that a write retried after a conflict
	// does not repeat it.
	requeued string
	// nodeLost is the message of a NodeLost requeue not yet written; its
	// Event follows the write.
	nodeLost string
	// moved is the message of a move (NodeDrained) not yet written, and
	// movedFrom the node it leaves; its Event and count follow the write.
	moved, movedFrom string
	// node is, in per-node mode, the node the ticket is placed on when it
	// is this manager's: its status.node.
	node string
	// cleanedUp: this reconcile found the ticket ended and nothing of it
	// left.
	cleanedUp bool
	// awaitingCache: a Sandbox this process created is not in the cache
	// yet; it is taken as created, and looked at again.
	awaitingCache bool
}

// stateNode writes into the status, after the base of the status patch is
// taken, the node the ticket is placed on when it is this manager's.
func (s *ticketScope) stateNode() {
	if s.node != "" {
		s.tk.Status.Node = s.node
	}
}

// Reconcile keeps a ticket's Sandboxes as its state asks.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	tk := &afev1.Ticket{}
	if err := r.Get(ctx, req.NamespacedName, tk); err != nil {
		if apierrors.IsNotFound(err) && r.Options.PerNode {
			return ctrl.Result{}, r.removeOrphanPlaceholder(ctx, req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if r.written.Stale(tk) {
		// Its newer version, this process's own write, is on its way.
		return ctrl.Result{RequeueAfter: writes.StaleRetry}, nil
	}
	s := &ticketScope{tk: tk, before: tk.DeepCopy()}
	res, err := r.reconcile(ctx, s)
	if wait := s.firstStatusWait(time.Now()); err == nil && wait > 0 {
		// Its sandboxes' becoming Ready brings the ticket back sooner.
		return writes.RequeueSooner(res, wait), nil
	}
	res, err = writes.ReconcileResult(res, err, client.IgnoreNotFound(r.commit(ctx, s)))
	if err != nil || !s.cleanedUp {
		return res, err
	}
	return r.expire(ctx, s.tk)
}

// expire deletes a finished ticket whose cleanup is done once its
// ttlSecondsAfterFinished (or --finished-ttl) has passed since
// status.finishedTime; the deletion goes through the ticket's finalizer, as
// any other.
func (r *Reconciler) expire(ctx context.Context, tk *afev1.Ticket) (ctrl.Result, error) {
	ttl, ok := writes.FinishedTTL(tk.Spec.TTLSecondsAfterFinished, r.Options.FinishedTTL)
	if !ok || tk.Status.FinishedTime == nil || !tk.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	if left := time.Until(tk.Status.FinishedTime.Add(ttl)); left > 0 {
		return ctrl.Result{RequeueAfter: left}, nil
	}
	logf.FromContext(ctx).Info("Deleting the finished ticket: its ttlSecondsAfterFinished passed", "ttl", ttl)
	return ctrl.Result{}, writes.DeleteExpired(ctx, r.Client, tk)
}

func (r *Reconciler) reconcile(ctx context.Context, s *ticketScope) (ctrl.Result, error) {
	if here, res, err := r.here(ctx, s); !here || err != nil {
		return res, err
	}
	now := time.Now()
	expired := s.tk.DeadlineExceeded(now)
	step := plan.Ticket(!s.tk.DeletionTimestamp.IsZero(), s.tk.Spec.State, expired)
	if step == plan.TicketDelete {
		s.stateNode()
		return r.reconcileDelete(ctx, s)
	}
	if rv := s.tk.ResourceVersion; !controllerutil.ContainsFinalizer(s.tk, afev1.TicketFinalizer) {
		if err := writes.EnsureFinalizer(ctx, r.Client, s.tk, afev1.TicketFinalizer); err != nil {
			return ctrl.Result{}, err
		}
		if s.tk.ResourceVersion != rv {
			r.written.Replaced(s.tk.UID, rv)
		}
	}
	s.before = s.tk.DeepCopy()
	s.stateNode()
	if expired && !s.tk.Spec.State.Terminal() {
		writes.SetCondition(s.tk, afev1.TicketFailedCondition, true, afev1.DeadlineExceededReason, fmt.Sprintf(
			"The ticket ran past spec.lifecycle.activeDeadlineSeconds (%ds): it ended Failed and everything of it is removed",
			s.tk.Spec.Lifecycle.ActiveDeadlineSeconds))
	}
	if err := r.reconcileNormal(ctx, s, step); err != nil {
		return ctrl.Result{}, err
	}
	// The deadline passing changes nothing the ticket watches.
	var res ctrl.Result
	if left := s.tk.DeadlineLeft(now); step != plan.TicketCleanUp && left > 0 {
		res.RequeueAfter = left
	}
	if s.awaitingCache {
		res = writes.RequeueSooner(res, time.Second)
	}
	return res, nil
}

// reconcileNormal keeps the Sandboxes as the ticket's step asks.
func (r *Reconciler) reconcileNormal(ctx context.Context, s *ticketScope, step plan.TicketStep) error {
	if err := r.observeSandboxes(ctx, s); err != nil {
		return err
	}
	tk, owned := s.tk, s.owned
	switch step {
	case plan.TicketCleanUp:
		done, err := r.cleanup(ctx, tk, owned)
		if err != nil {
			return err
		}
		if done {
			if err := r.removePlaceholder(ctx, tk); err != nil {
				return err
			}
		}
		s.cleanedUp = done
	case plan.TicketKeep:
		// Kept as they are: a paused ticket finds its containers again.
		status.SummarizeTicket(&tk.Status, tk.Generation, tk.Spec.State, owned, int32(len(owned)), nil)
	default:
		if err := r.reconcileActive(ctx, s); err != nil {
			return err
		}
	}
	tk.Status.ObservedGeneration = tk.Generation
	return nil
}

// reconcileDelete cleans up after a deleted ticket, then removes its
// finalizer. Not done yet: the deletion of its Sandboxes and the end of its
// Runs (both watched) bring the ticket back.
func (r *Reconciler) reconcileDelete(ctx context.Context, s *ticketScope) (ctrl.Result, error) {
	if err := r.observeSandboxes(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	tk, owned := s.tk, s.owned
	done, err := r.cleanup(ctx, tk, owned)
	if err != nil || !done {
		return ctrl.Result{}, err
	}
	if err := r.removePlaceholder(ctx, tk); err != nil {
		return ctrl.Result{}, err
	}
	// No status write follows: the removal is what is counted, and only one
	// write can remove the finalizer. (The write replaces the status in tk
	// with the server's, hence the copy.)
	cleaned := tk.DeepCopy()
	if removed, err := writes.RemoveFinalizer(ctx, r.Client, tk, afev1.TicketFinalizer); err != nil || !removed {
		return ctrl.Result{}, err
	}
	r.written.Forget(tk.UID)
	// A deleted ticket has no status left to say it: an Event does.
	if observeCleanup(s.before, cleaned) {
		r.Recorder.Eventf(cleaned, nil, corev1.EventTypeNormal, afev1.CleanedUpReason, "Cleanup",
			"Every sandbox and Docker object of the ticket was removed")
	}
	return ctrl.Result{}, nil
}

// reconcileActive creates the Sandboxes the ticket lacks, brings the others
// to the template, and deletes those it no longer needs.
func (r *Reconciler) reconcileActive(ctx context.Context, s *ticketScope) error {
	log := logf.FromContext(ctx)
	tk, owned := s.tk, s.owned
	desired := ticketspec.Sandboxes(tk)
	wanted := map[string]bool{}
	var current []afev1.Sandbox
	var conflict *metav1.Condition
	for i := range desired {
		want := &desired[i]
		wanted[want.Name] = true
		have := &afev1.Sandbox{}
		key := client.ObjectKeyFromObject(want)
		err := r.Get(ctx, key, have)
		if err == nil {
			r.written.Seen(key)
		}
		switch {
		case apierrors.IsNotFound(err) && r.written.RecentlyCreated(key, time.Now()):
			s.awaitingCache = true
			current = append(current, *want)
		case apierrors.IsNotFound(err):
			log.Info("Creating sandbox", "sandbox", want.Name)
			if err := r.Create(ctx, want); err != nil {
				return fmt.Errorf("create sandbox %s: %w", want.Name, err)
			}
			r.written.Created(key, time.Now())
			current = append(current, *want)
		case err != nil:
			return err
		case !ticketspec.OwnedBy(have, tk):
			conflict = &metav1.Condition{Type: afev1.TicketReadyCondition, Status: metav1.ConditionFalse, Reason: afev1.SandboxConflictReason,
				Message: fmt.Sprintf("Sandbox %s exists and does not belong to this ticket; rename or delete it", want.Name)}
		case !have.DeletionTimestamp.IsZero():
			current = append(current, *have) // replaced once gone
		default:
			// spec.suspend is the user's (kubectl afe suspend|resume), not
			// the template's.
			want.Spec.Suspend = have.Spec.Suspend
			if !equality.Semantic.DeepEqual(have.Spec, want.Spec) {
				log.Info("Updating sandbox to the ticket's template", "sandbox", have.Name)
				have.Spec = want.Spec
				if err := r.Update(ctx, have); err != nil {
					return fmt.Errorf("update sandbox %s: %w", have.Name, err)
				}
			}
			current = append(current, *have)
		}
	}
	for i := range owned {
		if !wanted[owned[i].Name] && owned[i].DeletionTimestamp.IsZero() {
			log.Info("Deleting sandbox the ticket no longer needs", "sandbox", owned[i].Name)
			if err := r.Delete(ctx, &owned[i]); client.IgnoreNotFound(err) != nil {
				return err
			}
		}
	}
	status.SummarizeTicket(&tk.Status, tk.Generation, tk.Spec.State, current, int32(len(desired)), conflict)
	return nil
}

// cleanup deletes the ticket's Sandboxes (their finalizers remove the
// containers, proxies, networks and volumes) and then whatever labelled
// Docker object of the ticket no Sandbox owns, snapshots included unless the
// ticket retains them. It is done when nothing else is left.
func (r *Reconciler) cleanup(ctx context.Context, tk *afev1.Ticket, owned []afev1.Sandbox) (bool, error) {
	for i := range owned {
		if owned[i].DeletionTimestamp.IsZero() {
			if err := r.Delete(ctx, &owned[i]); client.IgnoreNotFound(err) != nil {
				return false, err
			}
		}
	}
	if len(owned) > 0 {
		status.SummarizeTicketCleanup(&tk.Status, tk.Generation, len(owned), metav1.Now())
		return false, nil
	}
	// Runs of the ticket's sandboxes end (Failed) before the ticket does, so
	// that none can execute after it finished.
	if pending, err := r.unfinishedRuns(ctx, tk); err != nil || pending > 0 {
		return false, err
	}
	// The sweep keeps the snapshots the ticket retains (retainSnapshots).
	kept, err := r.Leftovers.SweepTicket(ctx, tk)
	if err != nil {
		return false, err
	}
	tk.Status.RetainedSnapshots = kept
	status.SummarizeTicketCleanup(&tk.Status, tk.Generation, 0, metav1.Now())
	return true, nil
}

// SetupWithManager registers the reconciler: Tickets and the Sandboxes they
// own (their status feeds the ticket's).
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	// By the owner reference, not a label: a label value holds at most 63
	// characters and a ticket's name up to 253.
	if err := mgr.GetFieldIndexer().IndexField(ctx, &afev1.Sandbox{}, sandboxTicketIndex, func(o client.Object) []string {
		if ref := metav1.GetControllerOf(o); ref != nil && ref.Kind == "Ticket" && ref.APIVersion == afev1.GroupVersion.String() {
			return []string{string(ref.UID)}
		}
		return nil
	}); err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr).
		For(&afev1.Ticket{}, builder.WithPredicates(writes.SpecOrDeletionChanged(nil))).
		Owns(&afev1.Sandbox{}).
		Watches(&afev1.Run{}, handler.EnqueueRequestsFromMapFunc(r.finishingTicketOfRun)).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(1, r.Options.MaxConcurrentReconciles)}).
		Named("ticket")
	if r.Options.PerNode {
		// The placeholders (the manager's cache holds only them) and the
		// readiness of the nodes they are bound to.
		if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.Pod{}, podNodeIndex, func(o client.Object) []string {
			if n := o.(*corev1.Pod).Spec.NodeName; n != "" {
				return []string{n}
			}
			return nil
		}); err != nil {
			return err
		}
		b = b.Owns(&corev1.Pod{}).
			Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.ticketsOnNode), builder.WithPredicates(nodeReadinessChanged()))
	}
	return b.Complete(r)
}
