// Package run executes Runs in their sandbox containers: the slots of a
// sandbox, the attempts, their containment (the kill at a deadline and the
// sweep after an end), snapshots and the built-in Runs.
package run

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/controllers/config"
	"afe.dev/sandbox/controllers/writes"
	"afe.dev/sandbox/internal/runrefs"
	"afe.dev/sandbox/internal/sandboxspec"
	"afe.dev/sandbox/internal/stoplog"
	"afe.dev/sandbox/internal/ticketspec"
)

// Reconciler executes Runs in their sandbox containers.
type Reconciler struct {
	client.Client
	// APIReader reads the Secrets a sandbox's env names, uncached.
	APIReader client.Reader
	Engine    Engine
	Recorder  events.EventRecorder
	Config    config.Config
	// Stops are the containers this manager stopped (a suspension): a
	// command that ends under one is interrupted, not completed.
	Stops *stoplog.Log

	// execs are the attempts this process runs; SetupWithManager makes it.
	execs *executions
}

// +kubebuilder:rbac:groups=sandbox.afe.dev,resources=runs,verbs=get;list;watch;update;patch;delete
// +kubebuilder:rbac:groups=sandbox.afe.dev,resources=runs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=sandbox.afe.dev,resources=runs/finalizers,verbs=update

// reconcileDelete stops a Run that is being deleted: its processes are
// killed before the finalizer goes.
func (r *Reconciler) reconcileDelete(ctx context.Context, run *afev1.Run) error {
	if a := r.execs.get(run.UID); a != nil && !a.done.Load() {
		sbx := &afev1.Sandbox{}
		if err := r.Get(ctx, types.NamespacedName{Namespace: run.Namespace, Name: run.Spec.SandboxRef.Name}, sbx); err == nil {
			if vopts, err := r.Config.Validation(); err == nil {
				ct, err := r.Engine.InspectContainer(ctx, a.containerID)
				if err == nil && sandboxspec.IdentityOf(sbx, r.Config.Instance).OwnsAs(ct.Labels, afev1.RoleSandbox) {
					if uid, _, err := sandboxspec.ValidateContainerUser(sbx.Spec.User, ct, vopts); err == nil {
						r.kill(ctx, a, uid)
					}
				}
			}
		}
		a.cancel()
	}
	r.execs.forget(run.UID)
	if err := r.discardSnapshot(ctx, run); err != nil {
		return err
	}
	return r.removeFinalizer(ctx, run)
}

// SetupWithManager registers the reconciler: Runs, the Sandboxes they name,
// and the ends of attempts.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	r.execs = newExecutions(ctx)
	if err := mgr.GetFieldIndexer().IndexField(ctx, &afev1.Run{}, runrefs.SandboxIndex, func(o client.Object) []string {
		return []string{o.(*afev1.Run).Spec.SandboxRef.Name}
	}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&afev1.Run{}, builder.WithPredicates(writes.SpecOrDeletionChanged(nil))).
		Watches(&afev1.Sandbox{}, handler.EnqueueRequestsFromMapFunc(r.runsOfSandbox)).
		Watches(&afev1.Ticket{}, handler.EnqueueRequestsFromMapFunc(r.runsOfTicket)).
		WatchesRawSource(r.execs.source()).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(1, r.Config.MaxConcurrentReconciles)}).
		Named("run").
		Complete(r)
}

// finishedTicketOf is the ticket whose sandbox the Run names, when that
// ticket is finished or being deleted.
func (r *Reconciler) finishedTicketOf(ctx context.Context, run *afev1.Run) (*afev1.Ticket, error) {
	tickets, err := runrefs.FinishingTickets(ctx, r.Client, run)
	if err != nil || len(tickets) == 0 {
		return nil, err
	}
	return tickets[0], nil
}

// runsOfTicket maps a Ticket to the unfinished Runs of its sandboxes.
func (r *Reconciler) runsOfTicket(ctx context.Context, o client.Object) []reconcile.Request {
	var reqs []reconcile.Request
	for _, s := range ticketspec.Sandboxes(o.(*afev1.Ticket)) {
		reqs = append(reqs, r.runsOfSandbox(ctx, &s)...)
	}
	return reqs
}

// runsOfSandbox maps a Sandbox to the unfinished Runs that name it.
func (r *Reconciler) runsOfSandbox(ctx context.Context, o client.Object) []reconcile.Request {
	list := &afev1.RunList{}
	if err := r.List(ctx, list, client.InNamespace(o.GetNamespace()), client.MatchingFields{runrefs.SandboxIndex: o.GetName()}); err != nil {
		logf.FromContext(ctx).Error(err, "List the Runs of a sandbox")
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		if !list.Items[i].Status.Phase.Terminal() {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return reqs
}

// sandboxReadyReason is the reason of the sandbox's Ready condition.
func sandboxReadyReason(sbx *afev1.Sandbox) string {
	if c := meta.FindStatusCondition(sbx.Status.Conditions, afev1.SandboxReadyCondition); c != nil {
		return c.Reason
	}
	return ""
}

// readyMessage is the message of the sandbox's Ready condition.
func readyMessage(sbx *afev1.Sandbox) string {
	if c := meta.FindStatusCondition(sbx.Status.Conditions, afev1.SandboxReadyCondition); c != nil {
		return c.Message
	}
	return ""
}

// expire deletes an ended Run once its ttlSecondsAfterFinished (or
// --finished-ttl) has passed since its completionTime.
func (r *Reconciler) expire(ctx context.Context, run *afev1.Run) (ctrl.Result, error) {
	ttl, ok := writes.FinishedTTL(run.Spec.TTLSecondsAfterFinished, r.Config.FinishedTTL)
	if !ok || !run.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	end := run.CreationTimestamp.Time
	if run.Status.CompletionTime != nil {
		end = run.Status.CompletionTime.Time
	}
	if left := time.Until(end.Add(ttl)); left > 0 {
		return ctrl.Result{RequeueAfter: left}, nil
	}
	logf.FromContext(ctx).Info("Deleting the ended Run: its ttlSecondsAfterFinished passed", "ttl", ttl)
	return ctrl.Result{}, writes.DeleteExpired(ctx, r.Client, run)
}
