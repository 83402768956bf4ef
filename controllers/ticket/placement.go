package ticket

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/controllers/writes"
	"afe.dev/sandbox/internal/placement"
	"afe.dev/sandbox/internal/ticketspec"
)

// Per-node mode (--per-node): one manager per node, each with its node as
// --instance and its node's engine. kube-scheduler places each Ticket by
// binding its placeholder Pod (internal/placement); the manager of that node
// reconciles the ticket, its Sandboxes and their Runs, and the others leave
// them alone. Any manager may make a placeholder and release a placement
// its node lost; both steps are idempotent.

// Its permissions (Pods and Nodes) are config/per-node's own ClusterRole,
// not markers: the Deployment's role cannot create Pods.

// releaseRetry is how soon a ticket whose placement was released is looked
// at again, to be placed anew (its status write changes nothing it watches).
const releaseRetry = time.Second

// podNodeIndex indexes the placeholder Pods by the node they are bound to.
const podNodeIndex = "spec.nodeName"

// nodeReady is true for a node that exists with its Ready condition True. A
// read that fails for another reason than its absence counts as Ready: a
// placement is released only on what was seen.
func nodeReady(ctx context.Context, c client.Reader) func(string) bool {
	return func(name string) bool {
		node := &corev1.Node{}
		if err := c.Get(ctx, types.NamespacedName{Name: name}, node); err != nil {
			return !apierrors.IsNotFound(err)
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				return cond.Status == corev1.ConditionTrue
			}
		}
		return false
	}
}

// here is the per-node gate (--per-node) of a ticket, its placement step:
// true when the ticket is placed on this manager's node (or was never
// placed and has ended), and it is then reconciled as with one engine.
// Always true with one manager for all nodes.
func (r *Reconciler) here(ctx context.Context, s *ticketScope) (here bool, res ctrl.Result, err error) {
	if !r.Options.PerNode {
		return true, ctrl.Result{}, nil
	}
	tk, key := s.tk, r.Options.PlacementKey
	pod, state, again, err := placement.PlaceholderOf(ctx, r.Client, key, tk)
	if err != nil {
		return false, ctrl.Result{}, err
	}
	d := r.decide(ctx, tk, pod, state)
	if d.Action != placement.Mine && d.Action != placement.Wait {
		// Another manager's write of the ticket must not undo what the
		// manager it is placed on wrote: the Pod is read again from the
		// API server, after the ticket. Had it been bound before, that
		// read shows it; bound after, the placed manager's write came
		// after the ticket read here, and the optimistic lock refuses
		// this manager's. That read also shows a Pod of the
		// placeholder's name the cache does not hold (no label).
		if pod, state, again, err = placement.PlaceholderOf(ctx, r.APIReader, key, tk); err != nil {
			return false, ctrl.Result{}, err
		}
		d = r.decide(ctx, tk, pod, state)
	}
	here, res, err = r.act(ctx, s, pod, state, d)
	if again > 0 && res.IsZero() {
		// A placeholder its maker has not signed yet: replaced if it
		// stays so.
		res.RequeueAfter = again
	}
	return here, res, err
}

// decide is this manager's placement decision for the ticket, with its
// placeholder as read.
func (r *Reconciler) decide(ctx context.Context, tk *afev1.Ticket, pod *corev1.Pod, state placement.PodState) placement.Decision {
	deleting := !tk.DeletionTimestamp.IsZero()
	in := placement.Input{
		Me:           r.Options.Instance,
		Ended:        deleting || tk.Ended(time.Now()),
		Deleting:     deleting,
		CleanedUp:    meta.IsStatusConditionTrue(tk.Status.Conditions, afev1.TicketCleanedUpCondition),
		Pod:          state,
		ReportedNode: tk.Status.Node,
		Folder:       tk.Spec.Sandbox.Workspace.Type == afev1.WorkspaceFolder,
		// Asked of the node's peer Lease only when there is no placeholder.
		Movable: state == placement.PodAbsent && r.Options.Moves != nil && tk.Spec.Sandbox.Workspace.Type != afev1.WorkspaceFolder &&
			tk.Status.Node != "" && r.Options.Moves.Live(ctx, tk.Status.Node),
		NodeReady: nodeReady(ctx, r.Client),
	}
	if state == placement.PodBound {
		in.PodNode = pod.Spec.NodeName
	}
	return placement.Decide(in)
}

// act carries the decision out; mine is true for a ticket placed here.
func (r *Reconciler) act(ctx context.Context, s *ticketScope, pod *corev1.Pod, state placement.PodState, d placement.Decision) (mine bool, res ctrl.Result, err error) {
	tk := s.tk
	switch d.Action {
	case placement.Mine:
		s.node = d.Node
		return true, ctrl.Result{}, nil
	case placement.CreatePod:
		// The finalizer first: a Ticket deleted before it is placed still
		// has its placeholder removed (no garbage collector is relied on).
		// Then a new decision from the Ticket as that write left it.
		if !controllerutil.ContainsFinalizer(tk, afev1.TicketFinalizer) {
			if err := writes.EnsureFinalizer(ctx, r.Client, tk, afev1.TicketFinalizer); err != nil {
				return false, ctrl.Result{}, err
			}
			s.before = tk.DeepCopy()
			return false, ctrl.Result{RequeueAfter: writes.StaleRetry}, nil
		}
		return false, ctrl.Result{}, r.createPlaceholder(ctx, tk)
	case placement.Pending:
		if msg, ok := placement.Unschedulable(pod); ok {
			setUnplaced(tk, afev1.UnschedulableReason, msg)
		} else {
			setUnplaced(tk, afev1.SchedulingReason, fmt.Sprintf("Waiting for kube-scheduler to place the placeholder Pod %s", pod.Name))
		}
	case placement.Conflict:
		setUnplaced(tk, afev1.PlacementConflictReason, fmt.Sprintf(
			"Pod %s exists and is not this ticket's placeholder; delete it, or rename the ticket", placement.PodName(tk.Name)))
		// Such a Pod may not be watched (the cache holds placeholders).
		return false, ctrl.Result{RequeueAfter: writes.ConflictRetry}, nil
	case placement.Stuck:
		writes.SetCondition(tk, afev1.TicketReadyCondition, false, afev1.NodeLostReason, fmt.Sprintf(
			"Node %s is lost; the ticket's Folder workspace is a folder on that node and cannot move: waiting for the node to come back", d.Node))
	case placement.Replace:
		return false, ctrl.Result{RequeueAfter: releaseRetry}, r.replaceUnproven(ctx, tk, pod)
	case placement.Move:
		res, err := r.move(ctx, s, d.Node)
		return false, res, err
	case placement.Release:
		done, err := r.release(ctx, s, pod, state, d)
		if err != nil || !done {
			return false, ctrl.Result{}, err
		}
		return false, ctrl.Result{RequeueAfter: releaseRetry}, nil
	}
	return false, ctrl.Result{}, nil
}

// setUnplaced states that the ticket waits for a placement.
func setUnplaced(tk *afev1.Ticket, reason, message string) {
	tk.Status.Phase = afev1.TicketPending
	writes.SetCondition(tk, afev1.TicketReadyCondition, false, reason, message)
	tk.Status.ObservedGeneration = tk.Generation
}

// createPlaceholder makes the ticket's placeholder Pod, requesting what its
// sandboxes and their proxies may use, and signs it. A Pod refused (a
// ResourceQuota, a LimitRange, Pod Security) is the ticket's condition, in
// the API server's words.
func (r *Reconciler) createPlaceholder(ctx context.Context, tk *afev1.Ticket) error {
	pod := placement.Pod(tk, ticketspec.Sandboxes(tk), r.Options.PlaceholderImage)
	err := r.Create(ctx, pod)
	switch {
	case err == nil:
		if err := r.signPlaceholder(ctx, tk, pod); err != nil {
			return err
		}
		logf.FromContext(ctx).Info("Created the placeholder Pod", "pod", pod.Name)
		r.Recorder.Eventf(tk, pod, corev1.EventTypeNormal, "PlaceholderCreated", "Place", "Created placeholder Pod %s for kube-scheduler", pod.Name)
	case apierrors.IsAlreadyExists(err):
	case apierrors.IsForbidden(err) || apierrors.IsInvalid(err):
		setUnplaced(tk, afev1.UnschedulableReason, "The placeholder Pod was refused: "+err.Error())
		return nil
	default:
		return fmt.Errorf("create placeholder pod: %w", err)
	}
	setUnplaced(tk, afev1.SchedulingReason, fmt.Sprintf("Waiting for kube-scheduler to place the placeholder Pod %s", pod.Name))
	return nil
}

// signPlaceholder signs the Pod this manager just made, as the API server
// returned it (its UID), and lifts its scheduling gate, in one write of
// that very version: a Pod changed or made again since is not signed (it
// is replaced once placement.UnsignedGrace is past).
func (r *Reconciler) signPlaceholder(ctx context.Context, tk *afev1.Ticket, pod *corev1.Pod) error {
	patch := client.MergeFromWithOptions(pod.DeepCopy(), client.MergeFromWithOptimisticLock{})
	r.Options.PlacementKey.Seal(pod, tk.UID)
	if err := r.Patch(ctx, pod, patch); err != nil {
		return fmt.Errorf("sign placeholder pod: %w", err)
	}
	return nil
}

// replaceUnproven deletes a Pod of the placeholder's name that names the
// Ticket as its controller but is not shown to be a manager's, bound by
// kube-scheduler (placement.PodUnproven): anyone who may create Pods in the
// namespace can write such a reference. Gone, it is handled as a deleted
// placeholder, and the ticket's own is made.
func (r *Reconciler) replaceUnproven(ctx context.Context, tk *afev1.Ticket, pod *corev1.Pod) error {
	msg := fmt.Sprintf("Pod %s names this ticket as its controller, but no manager signed it or kube-scheduler did not bind it: deleted, it places nothing", pod.Name)
	setUnplaced(tk, afev1.PlacementConflictReason, msg)
	uid := pod.UID
	err := r.Delete(ctx, pod, client.Preconditions{UID: &uid}, client.GracePeriodSeconds(0))
	switch {
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		return nil // another manager's, or gone
	case err != nil:
		return fmt.Errorf("delete unproven placeholder pod: %w", err)
	}
	logf.FromContext(ctx).Info("Deleted a Pod of the placeholder's name no manager signed", "pod", pod.Name, "uid", uid, "node", pod.Spec.NodeName)
	r.Recorder.Eventf(tk, pod, corev1.EventTypeWarning, afev1.PlacementConflictReason, "Replace", "%s", msg)
	return nil
}

// release undoes a lost placement: the ticket's Sandboxes are deleted (and,
// when their node is lost, their finalizers removed for its manager), then,
// once none is left, the placeholder; status.node is cleared, with a
// requeue (NodeLost) when work was interrupted. done is false while
// Sandboxes are still going (their removal brings the ticket back).
func (r *Reconciler) release(ctx context.Context, s *ticketScope, pod *corev1.Pod, state placement.PodState, d placement.Decision) (bool, error) {
	tk := s.tk
	log := logf.FromContext(ctx)
	owned, err := r.ownedSandboxes(ctx, tk)
	if err != nil {
		return false, err
	}
	for i := range owned {
		sbx := &owned[i]
		if sbx.DeletionTimestamp.IsZero() {
			log.Info("Deleting a sandbox of a lost placement", "sandbox", sbx.Name, "node", d.Node)
			if err := r.Delete(ctx, sbx); client.IgnoreNotFound(err) != nil {
				return false, err
			}
			continue // its finalizer goes from the copy that shows the deletion
		}
		if d.Strip {
			if _, err := writes.RemoveFinalizer(ctx, r.Client, sbx, afev1.SandboxFinalizer); err != nil {
				return false, err
			}
		}
	}
	why := fmt.Sprintf("Node %s is lost", d.Node)
	if d.Strip {
		why = fmt.Sprintf("Node %s is NotReady or gone", d.Node)
	} else if state != placement.PodBound {
		why = fmt.Sprintf("The placeholder Pod on node %s was deleted or evicted", d.Node)
	}
	if len(owned) > 0 {
		writes.SetCondition(tk, afev1.TicketReadyCondition, false, afev1.NodeLostReason, why+"; removing the ticket's sandboxes there before placing it anew")
		return false, nil
	}
	if state == placement.PodBound {
		uid := pod.UID
		err := r.Delete(ctx, pod, client.Preconditions{UID: &uid}, client.GracePeriodSeconds(0))
		if client.IgnoreNotFound(err) != nil {
			return false, fmt.Errorf("delete placeholder pod: %w", err)
		}
	}
	tk.Status.Node = ""
	if d.Requeue {
		now := metav1.Now()
		msg := why + ": the ticket's sandboxes are created afresh where kube-scheduler places it next; the step in flight was interrupted"
		tk.Status.Requeues++
		tk.Status.LastRequeueTime = &now
		tk.Status.LastRequeueReason = afev1.NodeLostReason
		writes.SetCondition(tk, afev1.TicketRequeuedCondition, true, afev1.NodeLostReason, msg)
		s.nodeLost = msg
	}
	setUnplaced(tk, afev1.NodeLostReason, why+"; placing the ticket anew")
	return true, nil
}

// removePlaceholder deletes the ticket's placeholder Pod once nothing of the
// ticket runs any more: its node's capacity goes back to kube-scheduler.
func (r *Reconciler) removePlaceholder(ctx context.Context, tk *afev1.Ticket) error {
	if !r.Options.PerNode {
		return nil
	}
	pod, state, _, err := placement.PlaceholderOf(ctx, r.Client, r.Options.PlacementKey, tk)
	if err != nil || state == placement.PodAbsent || state == placement.PodForeign {
		return err
	}
	uid := pod.UID
	err = r.Delete(ctx, pod, client.Preconditions{UID: &uid}, client.GracePeriodSeconds(0))
	return client.IgnoreNotFound(err)
}

// removeOrphanPlaceholder deletes, once the Ticket of that name is gone, a
// placeholder Pod it controlled (its finalizer removed by hand, say).
func (r *Reconciler) removeOrphanPlaceholder(ctx context.Context, key types.NamespacedName) error {
	pod := &corev1.Pod{}
	err := r.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: placement.PodName(key.Name)}, pod)
	if err != nil {
		return client.IgnoreNotFound(err)
	}
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != "Ticket" || ref.APIVersion != afev1.GroupVersion.String() || ref.Name != key.Name {
		return nil
	}
	uid := pod.UID
	logf.FromContext(ctx).Info("Deleting the placeholder Pod of a Ticket that is gone", "pod", pod.Name)
	return client.IgnoreNotFound(r.Delete(ctx, pod, client.Preconditions{UID: &uid}, client.GracePeriodSeconds(0)))
}

// ticketsOnNode maps a Node to the tickets whose placeholders are bound to
// it: its readiness decides whether they stay.
func (r *Reconciler) ticketsOnNode(ctx context.Context, o client.Object) []reconcile.Request {
	pods := &corev1.PodList{}
	if err := r.List(ctx, pods, client.MatchingFields{podNodeIndex: o.GetName()}); err != nil {
		logf.FromContext(ctx).Error(err, "List the placeholder Pods of a node")
		return nil
	}
	var reqs []reconcile.Request
	for i := range pods.Items {
		if ref := metav1.GetControllerOf(&pods.Items[i]); ref != nil && ref.Kind == "Ticket" {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: pods.Items[i].Namespace, Name: ref.Name}})
		}
	}
	return reqs
}

// nodeReadinessChanged passes a Node's creation, deletion, and changes of
// its Ready condition, not its heartbeats.
func nodeReadinessChanged() predicate.Funcs {
	ready := func(o client.Object) corev1.ConditionStatus {
		if n, ok := o.(*corev1.Node); ok {
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady {
					return c.Status
				}
			}
		}
		return corev1.ConditionUnknown
	}
	return predicate.Funcs{
		UpdateFunc:  func(e event.UpdateEvent) bool { return ready(e.ObjectOld) != ready(e.ObjectNew) },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}
