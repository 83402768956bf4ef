// Package sandbox reconciles Sandboxes into Docker objects: the workspace,
// the egress network and proxy, and the sandbox container, each phase
// owning a condition. It acts on the engine only through the identity
// checks of package shared.
package sandbox

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/controllers/shared"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/metrics"
	"afe.dev/sandbox/internal/sandboxspec"
	"afe.dev/sandbox/internal/status"
)

// Reconciler reconciles Sandboxes into Docker objects.
type Reconciler struct {
	client.Client
	// APIReader reads Secrets directly, so that Secrets are never cached.
	APIReader client.Reader
	Engine    Engine
	Recorder  events.EventRecorder
	Config    shared.Config
	// DockerEvents feeds container events into the reconcile queue.
	DockerEvents <-chan event.TypedGenericEvent[*afev1.Sandbox]
	// Activity is the commands seen in sandbox containers (nil: none are
	// seen, and only Runs keep a sandbox from its idle timeout).
	Activity *shared.ActivityLog
	// Stops records the containers this manager stops, for the Runs they
	// interrupt (nil: none are recorded).
	Stops *shared.StopLog
	// HostAddrs keeps the engine host's addresses the proxies refuse (nil:
	// they are read for each reconcile of a sandbox with egress).
	HostAddrs HostAddresses
	// Disk holds the measured workspace sizes (nil: disk limits are not
	// enforced on the workspace).
	Disk *shared.DiskMeter

	// mem is what this process remembers of each Sandbox between
	// reconciles (memory.go).
	mem memory
	// disk decides how disk limits are enforced on the engine.
	disk diskProbe
	// folderLocks holds a *sync.Mutex per namespace, held across the check
	// of a Folder workspace and the creation of its container.
	folderLocks sync.Map
	// subnets hands out the internal networks' subnets.
	subnets subnetPool
	// ids are the host ids being given to sandboxes without spec.user.
	ids idReservations
}

// sandboxScope is what one reconcile of a sandbox works with.
type sandboxScope struct {
	sbx *afev1.Sandbox
	// before is the Sandbox as last written, the base of status patches.
	before   *afev1.Sandbox
	id       sandboxspec.Identity
	resolved sandboxspec.Resolved
	// resuming: the sandbox was suspended and is to run again.
	resuming bool
	// recheck is when its lifecycle is decided again without an event.
	recheck time.Duration
	// suspendedFor says why this reconcile suspended the sandbox.
	suspendedFor string
	// proxyProbe ends with the first answer of a proxy this reconcile
	// started (awaitProxy waits for it).
	proxyProbe <-chan error
	// user is the id given to a sandbox without spec.user.
	user *claimedUser
}

// +kubebuilder:rbac:groups=sandbox.afe.dev,resources=sandboxes,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=sandbox.afe.dev,resources=sandboxes/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=sandbox.afe.dev,resources=sandboxes/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile brings the Docker objects of one Sandbox in line with its spec.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	sbx := &afev1.Sandbox{}
	if err := r.Get(ctx, req.NamespacedName, sbx); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if r.mem.wasFinalized(sbx.UID) {
		// A stale copy of a Sandbox already gone, even one from before its
		// deletion began: acting on it would make its objects again.
		return ctrl.Result{}, nil
	}
	s := &sandboxScope{sbx: sbx, before: sbx.DeepCopy(), id: sandboxspec.IdentityOf(sbx, r.Config.Instance)}
	if here, err := r.here(ctx, s); err != nil || !here {
		return shared.ReconcileResult(ctrl.Result{}, err, nil)
	}
	res, err := r.reconcile(ctx, s)
	return shared.ReconcileResult(res, err, client.IgnoreNotFound(r.commit(ctx, s)))
}

// here is the per-node gate (--per-node): this manager acts on the Sandbox
// when it is placed on this node (shared.SandboxHere). A Sandbox of no
// Ticket is no node's: it is told so (commitNotPlaced), once.
func (r *Reconciler) here(ctx context.Context, s *sandboxScope) (bool, error) {
	if !r.Config.PerNode {
		return true, nil
	}
	here, ticketed, err := shared.SandboxHere(ctx, r.Client, r.Config.Instance, s.sbx)
	if err != nil || here || ticketed || !s.sbx.DeletionTimestamp.IsZero() {
		return here, err // or another node's
	}
	return false, r.commitNotPlaced(ctx, s)
}

// commitNotPlaced writes the one condition of a Sandbox no node takes, and
// nothing else of its status.
func (r *Reconciler) commitNotPlaced(ctx context.Context, s *sandboxScope) error {
	shared.SetCondition(s.sbx, afev1.SandboxReadyCondition, false, afev1.NotPlacedReason,
		"In per-node mode a Sandbox runs only as part of a Ticket, which kube-scheduler places on a node; create a Ticket with this sandbox as its template")
	_, err := shared.PatchStatus(ctx, r.Client, s.before, s.sbx, afev1.SandboxFinalizer, func(o *afev1.Sandbox) any { return o.Status })
	return client.IgnoreNotFound(err)
}

func (r *Reconciler) reconcile(ctx context.Context, s *sandboxScope) (ctrl.Result, error) {
	if !s.sbx.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, s)
	}
	if err := shared.EnsureFinalizer(ctx, r.Client, s.sbx, afev1.SandboxFinalizer); err != nil {
		return ctrl.Result{}, err
	}
	s.before = s.sbx.DeepCopy()
	res, err := r.reconcileNormal(ctx, s)
	// A recorded loss stays the condition through an outage: it is what
	// makes the next reconcile finish the recreation (lossPending).
	if errors.Is(err, docker.ErrUnavailable) && !lossRecorded(s.sbx) {
		shared.SetCondition(s.sbx, afev1.ContainerReadyCondition, false, afev1.EngineUnavailableReason,
			"The Docker engine cannot be reached; retrying")
	}
	return res, err
}

func (r *Reconciler) reconcileNormal(ctx context.Context, s *sandboxScope) (ctrl.Result, error) {
	vopts, err := r.Config.Validation()
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := sandboxspec.Validate(&s.sbx.Spec.SandboxTemplateSpec, vopts); err != nil {
		if err := r.removeRefusedContainer(ctx, s); err != nil {
			return ctrl.Result{}, err
		}
		return r.invalidSpec(ctx, s, err)
	}
	if err := r.resolveRuntime(ctx, s, vopts); err != nil {
		return r.invalidSpec(ctx, s, err)
	}
	env, err := r.resolveEnv(ctx, s.sbx)
	if err != nil {
		return r.invalidSpec(ctx, s, err)
	}
	s.resolved.Env = env
	if err := r.resolveDisk(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	if stopped, res, err := r.reconcileLifecycle(ctx, s); stopped || err != nil {
		return res, err
	}

	if s.sbx.Spec.User == "" { // an id of its own (ids.go)
		claim, res, err := r.allocateUser(ctx, s)
		if claim == nil {
			return res, err
		}
		defer claim.release()
		s.user = claim
	}
	phases := []func(context.Context, *sandboxScope) (ctrl.Result, error){
		r.reconcileWorkspace,
		r.reconcileEgress,
		r.reconcileContainer,
		r.awaitProxy,
		r.cleanupEgress,
	}
	// A proxy still being made when a phase stops the reconcile is
	// abandoned with it (RunContainer leaves nothing half-made), and the
	// reconcile ends once that is done.
	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		if s.proxyProbe != nil {
			if err := <-s.proxyProbe; err != nil {
				// The next reconcile sees the proxy as the engine has it.
				logf.FromContext(ctx).V(1).Info("The proxy's creation was abandoned", "error", err.Error())
			}
			s.proxyProbe = nil
		}
	}()
	for _, phase := range phases {
		if res, err := phase(ctx, s); err != nil || !res.IsZero() {
			return res, err
		}
	}
	s.sbx.Status.ObservedGeneration = s.sbx.Generation
	// Nothing to do until an event says otherwise (the Docker event stream
	// and the sweep's batched list, every ResyncPeriod, bring it back here)
	// or a lifecycle timer runs out.
	return ctrl.Result{RequeueAfter: s.recheck}, nil
}

// invalidSpec reports a spec the controller cannot honour. Nothing is created;
// objects of an earlier, valid spec are left as they are, but for a
// container whose user the policy now refuses (see removeRefusedContainer)
// and the container of a Folder workspace that is no longer acceptable.
func (r *Reconciler) invalidSpec(ctx context.Context, s *sandboxScope, err error) (ctrl.Result, error) {
	ie, ok := sandboxspec.AsInvalid(err)
	if !ok {
		return ctrl.Result{}, err
	}
	if s.sbx.Spec.Workspace.Type == afev1.WorkspaceFolder && folderRefusedReasons[ie.Reason] {
		return r.refuseFolder(ctx, s, err)
	}
	return r.refuse(ctx, s, afev1.ContainerReadyCondition, ie)
}

// refuse sets the condition of a spec that cannot be honoured.
func (r *Reconciler) refuse(ctx context.Context, s *sandboxScope, condType string, ie *sandboxspec.InvalidError) (ctrl.Result, error) {
	logf.FromContext(ctx).Info("Sandbox spec cannot be honoured", "reason", ie.Reason, "message", ie.Message)
	shared.SetCondition(s.sbx, condType, false, ie.Reason, ie.Message)
	s.sbx.Status.ObservedGeneration = s.sbx.Generation
	switch ie.Reason {
	case afev1.SecretNotFoundReason, afev1.SecretNotAllowedReason:
		// Secrets are not watched (nor cached): look again in a while.
		return ctrl.Result{RequeueAfter: 15 * time.Second}, nil
	case afev1.WorkspaceMissingReason:
		// Nor are host folders; one may be made, or be back from a rename.
		return ctrl.Result{RequeueAfter: folderConflictRetry}, nil
	case afev1.WorkspaceRootUnsafeReason:
		// Nor is the root's mount; an operator may mount it as the message says.
		return ctrl.Result{RequeueAfter: shared.ConflictRetry}, nil
	case afev1.RuntimeUnavailableReason:
		// Nor is the engine's list of runtimes (daemon.json and SIGHUP).
		return ctrl.Result{RequeueAfter: runtimeRetry}, nil
	}
	return ctrl.Result{}, reconcile.TerminalError(ie)
}

// reconcileDelete removes the sandbox's Docker objects, newest first, then
// the finalizer.
func (r *Reconciler) reconcileDelete(ctx context.Context, s *sandboxScope) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(s.sbx, afev1.SandboxFinalizer) {
		r.forget(s.sbx.UID) // its finalizer removed by another
		return ctrl.Result{}, nil
	}
	log := logf.FromContext(ctx)
	// Newest first: the containers (the sandbox's, its proxy, any copy
	// helper a crash left, which would hold the volumes), its network, and
	// last the workspace.
	// Each kind in one list of the objects labelled with the Sandbox's UID,
	// whatever their names (a legacy name's too), each checked as this
	// sandbox's in its role before it goes.
	if err := r.removeLabelledContainers(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.removeOwnedNetworks(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	s.sbx.Status.ProxyName, s.sbx.Status.ProxyURL, s.sbx.Status.NetworkName = "", "", ""
	if err := r.removeOwnedVolumes(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	log.Info("Removed the sandbox's Docker objects")
	removed, err := shared.RemoveFinalizer(ctx, r.Client, s.sbx, afev1.SandboxFinalizer)
	if err != nil || !removed {
		return ctrl.Result{}, err
	}
	r.forget(s.sbx.UID)
	r.mem.rememberFinalized(s.sbx.UID)
	r.Recorder.Eventf(s.sbx, nil, corev1.EventTypeNormal, "Deleted", "Delete", "Removed container, proxy, network and workspace volume")
	return ctrl.Result{}, nil
}

// removeLabelledContainers removes every container labelled as this
// sandbox's, in one list: the proxy, and the snapshot copy helpers of a
// copy cut short by a crash.
func (r *Reconciler) removeLabelledContainers(ctx context.Context, s *sandboxScope) error {
	return shared.RemoveContainers(ctx, r.Engine, map[string]string{
		afev1.LabelController: s.id.Instance,
		afev1.LabelSandboxUID: s.id.UID,
	})
}

// labelled are the labels every object of the sandbox carries.
func (s *sandboxScope) labelled() map[string]string {
	return map[string]string{afev1.LabelController: s.id.Instance, afev1.LabelSandboxUID: s.id.UID}
}

// removeOwnedNetworks removes the sandbox's networks (its egress network),
// in one list.
func (r *Reconciler) removeOwnedNetworks(ctx context.Context, s *sandboxScope) error {
	networks, err := r.Engine.ListNetworks(ctx, s.labelled())
	if err != nil {
		return err
	}
	for _, n := range networks {
		if s.id.OwnsAs(n.Labels, afev1.RoleNetwork) {
			if err := r.Engine.RemoveNetwork(ctx, n.ID); err != nil {
				return err
			}
		}
	}
	return nil
}

// removeOwnedVolumes removes, in one list, the sandbox's workspace volume,
// the volumes of its image's VOLUME paths, and the snapshot volumes of a Sandbox without ticket. A ticket's
// snapshots belong to the ticket: they go when it finishes, unless it
// retains them.
func (r *Reconciler) removeOwnedVolumes(ctx context.Context, s *sandboxScope) error {
	volumes, err := r.Engine.ListVolumes(ctx, s.labelled())
	if err != nil {
		return err
	}
	ownSnapshots := s.sbx.Spec.TicketRef == nil || s.sbx.Spec.TicketRef.Name == ""
	for _, v := range volumes {
		if s.id.OwnsAs(v.Labels, afev1.RoleWorkspace) || s.id.OwnsAs(v.Labels, afev1.RoleImageVolume) || ownSnapshots && s.id.OwnsAs(v.Labels, afev1.RoleSnapshot) {
			if err := r.Engine.RemoveVolume(ctx, v.Name); err != nil {
				return err
			}
		}
	}
	return nil
}

// commit summarises the conditions and writes the status once, only
// when it changed, and only over the version it read: a reconcile that
// started from a stale cache must not overwrite what a newer one wrote (the
// time to Ready, for one). The metrics follow the write that states them.
func (r *Reconciler) commit(ctx context.Context, s *sandboxScope) error {
	sbx, before := s.sbx, s.before
	deleting := !sbx.DeletionTimestamp.IsZero()
	if deleting && !controllerutil.ContainsFinalizer(sbx, afev1.SandboxFinalizer) {
		return nil // gone, or about to be
	}
	now := metav1.Now()
	status.SummarizeSandbox(&sbx.Status, sbx.Generation, deleting, now)
	written, err := shared.PatchStatus(ctx, r.Client, before, sbx, afev1.SandboxFinalizer,
		func(o *afev1.Sandbox) any { return o.Status })
	if !written {
		return err
	}
	r.mem.written.record(sbx.UID, sbx.Status.ContainerID)
	observeReady(before, sbx, now)
	r.observeSuspension(s, before)
	if lost := sbx.Status.Recreations - before.Status.Recreations; lost > 0 {
		metrics.Recreations.WithLabelValues("lost").Add(float64(lost))
	}
	s.before = sbx.DeepCopy()
	return nil
}

// observeReady records the time to Ready of a new sandbox, and from a loss
// to its replacement.
func observeReady(before, sbx *afev1.Sandbox, now metav1.Time) {
	if meta.IsStatusConditionTrue(before.Status.Conditions, afev1.SandboxReadyCondition) ||
		!meta.IsStatusConditionTrue(sbx.Status.Conditions, afev1.SandboxReadyCondition) {
		return
	}
	switch {
	case before.Status.ReadyTime == nil:
		metrics.SandboxReady.WithLabelValues(strconv.FormatBool(len(sbx.Spec.Egress) > 0)).
			Observe(now.Sub(sbx.CreationTimestamp.Time).Seconds())
	case sbx.Status.LastLostTime != nil && sbx.Status.LastLostTime.After(before.Status.ReadyTime.Time):
		metrics.SandboxRecovered.Observe(now.Sub(sbx.Status.LastLostTime.Time).Seconds())
	}
}

// SetupWithManager registers the reconciler: Sandboxes (spec changes and
// deletion, not our own status writes) and Docker container events.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr).
		For(&afev1.Sandbox{}, builder.WithPredicates(shared.SpecOrDeletionChanged(statusForgeable(&r.mem.written)))).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(1, r.Config.MaxConcurrentReconciles)}).
		Named("sandbox")
	// Both sides of a Folder workspace conflict look again when either
	// changes.
	b = b.Watches(&afev1.Sandbox{}, handler.EnqueueRequestsFromMapFunc(r.folderNeighbours), builder.WithPredicates(folderChanged()))
	// A new Run resumes a suspended sandbox; the end of one restarts the
	// idle timer.
	b = b.Watches(&afev1.Run{}, handler.EnqueueRequestsFromMapFunc(r.sandboxOfRun), builder.WithPredicates(runStartedOrEnded()))
	if r.DockerEvents != nil {
		b = b.WatchesRawSource(source.Channel(r.DockerEvents, &handler.TypedEnqueueRequestForObject[*afev1.Sandbox]{}))
	}
	return b.Complete(r)
}

// statusForgeable passes the status-only updates of a Sandbox that may be
// forged (anyone granted sandboxes/status can write it): a status naming
// another object than the Sandbox's own, or a changed container ID other
// than the one this manager wrote. The reconcile writes those fields again
// at once; the sweep is the fallback.
func statusForgeable(own *writtenIDs) func(old, obj client.Object) bool {
	return func(o, n client.Object) bool {
		old, okOld := o.(*afev1.Sandbox)
		sbx, okNew := n.(*afev1.Sandbox)
		return okOld && okNew && (shared.StatusNamesForeign(sbx) ||
			old.Status.ContainerID != sbx.Status.ContainerID && !own.wrote(sbx.UID, sbx.Status.ContainerID))
	}
}

// runStartedOrEnded passes the creation and deletion of a Run and changes of
// its phase.
func runStartedOrEnded() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			old, okOld := e.ObjectOld.(*afev1.Run)
			run, okNew := e.ObjectNew.(*afev1.Run)
			return okOld && okNew && old.Status.Phase != run.Status.Phase
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// HostAddresses are the engine host's addresses the proxies refuse, as a
// watch of them keeps them.
type HostAddresses interface {
	Current(ctx context.Context) ([]string, error)
}
