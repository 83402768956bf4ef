// Package sandbox reconciles Sandboxes into Docker objects: the workspace,
// the egress network and proxy, and the sandbox container, each phase
// owning a condition. It acts on the engine only through the identity
// checks of controllers/identity.
package sandbox

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/controllers/config"
	"afe.dev/sandbox/controllers/disklimit"
	"afe.dev/sandbox/controllers/egressnet"
	"afe.dev/sandbox/controllers/hostids"
	"afe.dev/sandbox/controllers/writes"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/activity"
	"afe.dev/sandbox/internal/crashpoint"
	"afe.dev/sandbox/internal/placement"
	"afe.dev/sandbox/internal/poolsync"
	"afe.dev/sandbox/internal/sandboxspec"
	"afe.dev/sandbox/internal/stoplog"
)

// Reconciler reconciles Sandboxes into Docker objects.
type Reconciler struct {
	client.Client
	// APIReader reads Secrets directly, so that Secrets are never cached.
	APIReader client.Reader
	Engine    Engine
	Recorder  events.EventRecorder
	Config    config.Config
	// DockerEvents feeds container events into the reconcile queue.
	DockerEvents <-chan event.TypedGenericEvent[*afev1.Sandbox]
	// Activity is the commands seen in sandbox containers (nil: none are
	// seen, and only Runs keep a sandbox from its idle timeout).
	Activity *activity.Log
	// Stops records the containers this manager stops, for the Runs they
	// interrupt (nil: none are recorded).
	Stops *stoplog.Log
	// HostAddrs keeps the engine host's addresses the proxies refuse (nil:
	// they are read for each reconcile of a sandbox with egress).
	HostAddrs HostAddresses
	// Disk holds the measured workspace sizes (nil: disk limits are not
	// enforced on the workspace).
	Disk *disklimit.Meter
	// IDs are the host ids being given, shared with the pool reconciler
	// (nil: the reconciler keeps its own).
	IDs *hostids.Allocator
	// Probe decides how disk limits are enforced, once per manager (nil:
	// the reconciler keeps its own).
	Probe *disklimit.Probe
	// Cold counts the container creations in flight, which the refill of
	// pools makes room for (nil: none are counted).
	Cold *poolsync.InFlight
	// Claims counts the claims of pool members in flight, which hold the
	// refill of pools back (nil: none are counted).
	Claims *poolsync.InFlight
	// Turns serialize the claims of a pool's members with the pool's own
	// removals.
	Turns *poolsync.Turns
	// PoolCounts passes the claims and misses to the pools' status.
	PoolCounts *poolsync.Counts
	// EnqueuePool has a pool looked at once a member of it was claimed
	// (nil: its resync does).
	EnqueuePool func(namespace, name string)
	// Subnets hands out the internal networks' subnets, shared with the
	// SandboxPool reconciler (nil: the reconciler's own).
	Subnets *egressnet.Subnets

	// mem is what this process remembers of each Sandbox between
	// reconciles (memory.go).
	mem memory
	// ownProbe decides how disk limits are enforced on the engine when the
	// manager shares no probe (Probe).
	ownProbe disklimit.Probe
	// folderLocks holds a *sync.Mutex per namespace, held across the check
	// of a Folder workspace and the creation of its container.
	folderLocks sync.Map
	// ownSubnets hands out the subnets when the manager shares none
	// (Subnets).
	ownSubnets egressnet.Subnets
	// ownIDs are the host ids being given to sandboxes without spec.user
	// when the manager shares none (IDs).
	ownIDs hostids.Allocator
}

// sandboxScope is what one reconcile of a sandbox works with.
type sandboxScope struct {
	sbx *afev1.Sandbox
	// before is the Sandbox as last written, the base of status patches.
	before   *afev1.Sandbox
	id       sandboxspec.Identity
	resolved sandboxspec.Resolved
	// wasSuspended: the sandbox was suspended when the reconcile began;
	// it is resumed unless its lifecycle keeps it stopped.
	wasSuspended bool
	// recheck is when its lifecycle is decided again without an event.
	recheck time.Duration
	// suspendedFor says why this reconcile suspended the sandbox.
	suspendedFor string
	// proxyProbe ends with the first answer of a proxy this reconcile
	// started (awaitProxy waits for it).
	proxyProbe <-chan error
	// allowlist is what the sandbox's proxy is to admit.
	allowlist sandboxspec.Allowlist
	// user is the id given to a sandbox without spec.user.
	user *hostids.Reservation
	// claimed is the pool member the sandbox runs on (nil: a cold one).
	claimed *claimedMember
	// claimingProxy is true when this reconcile took the claimed member's
	// proxy, which admits nothing yet: its first allowlist is part of the
	// claim, not a change.
	claimingProxy bool
	// proxy is the sandbox's proxy as this reconcile already inspected it
	// (the claim, which finds it under one name or the other); nil: not
	// looked at yet. ensureProxy takes it rather than asking the engine
	// again.
	proxy *docker.Container
	// proxyAddress is the address of the sandbox's proxy on its network,
	// which its container's /etc/hosts names (ensureProxy).
	proxyAddress string
	// claimStarted is when this reconcile began choosing a member.
	claimStarted time.Time
	// moving is true while the sandbox arrives from another node with its
	// workspace (move.go): status.node stays that node's.
	moving bool
	// claimEnd ends the count of this reconcile's claim in flight, and
	// refill is the pool it took a member of; both are done once its
	// status is written (endClaim).
	claimEnd func()
	refill   string
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
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, r.vanished(ctx, req.NamespacedName)
		}
		return ctrl.Result{}, err
	}
	if r.mem.wasFinalized(sbx.UID) {
		// A stale copy of a Sandbox already gone, even one from before its
		// deletion began: acting on it would make its objects again.
		return ctrl.Result{}, nil
	}
	s := &sandboxScope{sbx: sbx, before: sbx.DeepCopy(), id: sandboxspec.IdentityOf(sbx, r.Config.Instance)}
	if here, res, err := r.here(ctx, s); err != nil || !here {
		return writes.ReconcileResult(res, err, nil)
	}
	res, err := r.reconcile(ctx, s)
	committed := r.commit(ctx, s)
	r.endClaim(s)
	if committed == nil && s.sbx.DeletionTimestamp.IsZero() {
		if s.claimed != nil && !controllerutil.ContainsFinalizer(s.sbx, afev1.SandboxFinalizer) {
			crashpoint.Here(CrashClaimStatusWritten)
		}
		committed = r.ensureFinalizer(ctx, s)
	}
	if apierrors.IsNotFound(committed) {
		committed = r.deletedUnfinalized(ctx, s)
	}
	return writes.ReconcileResult(res, err, client.IgnoreNotFound(committed))
}

// ensureFinalizer writes the Sandbox's finalizer when it lacks it, and
// keeps the status the reconcile set so far. A sandbox served from a pool
// has it written after its first status, which says it is Ready: the
// claim waits on one API write instead of two. What a Sandbox deleted in
// between claimed is removed by this reconcile when its write finds the
// Sandbox gone (deletedUnfinalized); by the reconcile that finds it gone
// when a delete that began before the write removes it all the same
// (vanished.go); or else, after a crash, by the sweep
// (loops.Sweeper): its claim record names a Sandbox UID that no longer
// exists, then no record binds its member, as after a finalizer removed by
// hand. A sandbox made cold has it before any object of its own is made
// (reconcileNormal).
func (r *Reconciler) ensureFinalizer(ctx context.Context, s *sandboxScope) error {
	if controllerutil.ContainsFinalizer(s.sbx, afev1.SandboxFinalizer) {
		return nil
	}
	status, finalizers := s.sbx.Status.DeepCopy(), slices.Clone(s.sbx.Finalizers)
	if err := writes.EnsureFinalizer(ctx, r.Client, s.sbx, afev1.SandboxFinalizer); err != nil {
		s.sbx.Finalizers, s.sbx.Status = finalizers, *status
		return err
	}
	r.mem.finalized.remember(s.sbx)
	s.before = s.sbx.DeepCopy()
	s.sbx.Status = *status
	return nil
}

// endClaim ends the count of the reconcile's claim in flight, and has the
// pool it took a member of refilled: after the claimant's status, not
// beside it.
func (r *Reconciler) endClaim(s *sandboxScope) {
	if s.claimEnd != nil {
		s.claimEnd()
	}
	if s.refill != "" && r.EnqueuePool != nil {
		r.EnqueuePool(s.id.Namespace, s.refill)
	}
}

// here is the per-node gate (--per-node): this manager acts on the Sandbox
// when it is placed on this node (placement.SandboxHere). Another node's
// sandbox that ran here before its ticket moved is removed from here once
// that node holds it (moveOut). A Sandbox of no Ticket is no node's: it is told
// so (commitNotPlaced), once.
func (r *Reconciler) here(ctx context.Context, s *sandboxScope) (bool, ctrl.Result, error) {
	if !r.Config.PerNode {
		return true, ctrl.Result{}, nil
	}
	here, ticketed, err := placement.SandboxHere(ctx, r.Client, r.Config.Instance, r.Config.PlacementKey, s.sbx)
	switch {
	case err != nil || here:
		return here, ctrl.Result{}, err
	case ticketed:
		res, err := r.moveOut(ctx, s)
		return false, res, err
	case !s.sbx.DeletionTimestamp.IsZero():
		return false, ctrl.Result{}, nil
	}
	return false, ctrl.Result{}, r.commitNotPlaced(ctx, s)
}

// commitNotPlaced writes the one condition of a Sandbox no node takes, and
// nothing else of its status.
func (r *Reconciler) commitNotPlaced(ctx context.Context, s *sandboxScope) error {
	writes.SetCondition(s.sbx, afev1.SandboxReadyCondition, false, afev1.NotPlacedReason,
		"In per-node mode a Sandbox runs only as part of a Ticket, which kube-scheduler places on a node; create a Ticket with this sandbox as its template")
	_, err := writes.PatchStatus(ctx, r.Client, s.before, s.sbx, afev1.SandboxFinalizer, func(o *afev1.Sandbox) any { return o.Status })
	return client.IgnoreNotFound(err)
}

func (r *Reconciler) reconcile(ctx context.Context, s *sandboxScope) (ctrl.Result, error) {
	if !s.sbx.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, s)
	}
	res, err := r.reconcileNormal(ctx, s)
	// A recorded loss stays the condition through an outage: it is what
	// makes the next reconcile finish the recreation (lossRecorded).
	if errors.Is(err, docker.ErrUnavailable) && !lossRecorded(s.sbx) {
		writes.SetCondition(s.sbx, afev1.ContainerReadyCondition, false, afev1.EngineUnavailableReason,
			"The Docker engine cannot be reached; retrying")
	}
	return res, err
}

func (r *Reconciler) reconcileNormal(ctx context.Context, s *sandboxScope) (ctrl.Result, error) {
	if done, res, err := r.resolve(ctx, s); done || err != nil {
		return res, err
	}
	if stopped, res, err := r.reconcileLifecycle(ctx, s); stopped || err != nil {
		return res, err
	}

	if done, res, err := r.reconcileClaim(ctx, s); done || err != nil {
		return res, err
	}
	if s.claimed == nil {
		if err := r.ensureFinalizer(ctx, s); err != nil {
			return ctrl.Result{}, err
		}
	}
	switch {
	case s.claimed != nil:
		// The member's user: spec.user, or the id the member was given.
		s.resolved.User = s.claimed.container.Labels[afev1.LabelUser]
	case s.sbx.Spec.User == "": // an id of its own (ids.go)
		claim, res, err := r.allocateUser(ctx, s)
		if claim == nil {
			return res, err
		}
		defer claim.Release()
		s.user = claim
	}
	if res, err := r.runPhases(ctx, s); err != nil || !res.IsZero() {
		return res, err
	}
	s.sbx.Status.ObservedGeneration = s.sbx.Generation
	// Nothing to do until an event says otherwise (the Docker event stream
	// and the sweep's batched list, every ResyncPeriod, bring it back here)
	// or a lifecycle timer runs out.
	return ctrl.Result{RequeueAfter: s.recheck}, nil
}

// resolve validates the spec and resolves what it names (the runtime, the
// env, the disk limit); done is true when the reconcile ends here (a spec
// that cannot be honoured, or an error).
func (r *Reconciler) resolve(ctx context.Context, s *sandboxScope) (done bool, res ctrl.Result, err error) {
	vopts, err := r.Config.Validation()
	if err != nil {
		return true, ctrl.Result{}, err
	}
	if err := sandboxspec.Validate(&s.sbx.Spec.SandboxTemplateSpec, vopts); err != nil {
		if err := r.removeRefusedContainer(ctx, s); err != nil {
			return true, ctrl.Result{}, err
		}
		return r.refuseSpec(ctx, s, err)
	}
	if err := r.resolveRuntime(ctx, s, vopts); err != nil {
		return r.refuseSpec(ctx, s, err)
	}
	// Resolved here for the condition (a missing Secret is said on the
	// Sandbox) and for the container of a sandbox with its own command;
	// the commands executed in it resolve it again (sandboxenv).
	env, err := r.Config.EnvResolver(r.APIReader).Resolve(ctx, s.sbx)
	if err != nil {
		return r.refuseSpec(ctx, s, err)
	}
	s.resolved.Env = env
	if err := r.resolveDisk(ctx, s); err != nil {
		return true, ctrl.Result{}, err
	}
	return false, ctrl.Result{}, nil
}

// refuseSpec is invalidSpec, as resolve returns it.
func (r *Reconciler) refuseSpec(ctx context.Context, s *sandboxScope, err error) (bool, ctrl.Result, error) {
	res, err := r.invalidSpec(ctx, s, err)
	return true, res, err
}

// runPhases runs the phases of a sandbox that is to run, each owning its
// condition, until one stops the reconcile.
func (r *Reconciler) runPhases(ctx context.Context, s *sandboxScope) (ctrl.Result, error) {
	phases := []func(context.Context, *sandboxScope) (ctrl.Result, error){
		r.reconcileWorkspace,
		r.reconcileEgress,
		r.reconcileContainer,
		r.settleArrived,
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
	return ctrl.Result{}, nil
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
	writes.SetCondition(s.sbx, condType, false, ie.Reason, ie.Message)
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
		return ctrl.Result{RequeueAfter: writes.ConflictRetry}, nil
	case afev1.RuntimeUnavailableReason:
		// Nor is the engine's list of runtimes (daemon.json and SIGHUP).
		return ctrl.Result{RequeueAfter: runtimeRetry}, nil
	}
	return ctrl.Result{}, reconcile.TerminalError(ie)
}

// HostAddresses are the engine host's addresses the proxies refuse, as a
// watch of them keeps them.
type HostAddresses interface {
	Current(ctx context.Context) ([]string, error)
}
