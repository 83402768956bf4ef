package pool

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/controllers/config"
	"afe.dev/sandbox/controllers/disklimit"
	"afe.dev/sandbox/controllers/egressnet"
	"afe.dev/sandbox/controllers/hostids"
	"afe.dev/sandbox/controllers/identity"
	"afe.dev/sandbox/controllers/writes"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/metrics"
	"afe.dev/sandbox/internal/naming"
	"afe.dev/sandbox/internal/pool"
	"afe.dev/sandbox/internal/poolsync"
	"afe.dev/sandbox/internal/sandboxspec"
)

// Reconciler keeps each SandboxPool's unclaimed members on the engine: it
// makes them up to the pool's replicas at the pace internal/pool.Refill
// sets, replaces those of an earlier template and those lost or exited,
// removes the surplus, and all of them when the pool goes. A claimed
// member is the claimant Sandbox's: the pool never touches it again.
type Reconciler struct {
	client.Client
	// APIReader reads Secrets directly (the env of a template with its own
	// command), so that Secrets are never cached.
	APIReader client.Reader
	Engine    Engine
	Recorder  events.EventRecorder
	Config    config.Config
	// IDs are the host ids being given, shared with the Sandbox reconciler.
	IDs *hostids.Allocator
	// Turns serialize a pool's claims and removals.
	Turns *poolsync.Turns
	// Cold counts the cold sandbox creations in flight, which the refill
	// makes room for.
	Cold *poolsync.InFlight
	// Claims counts the claims in flight, which hold the refill back.
	Claims *poolsync.InFlight
	// Counts are the claims and misses the Sandbox reconciler counted.
	Counts *poolsync.Counts
	// Subnets hands out the subnets of the members' internal networks,
	// shared with the Sandbox reconciler (nil: the reconciler's own).
	Subnets *egressnet.Subnets
	// Probe says how resources.disk is enforced on the engine, shared with
	// the Sandbox reconciler, so that a member is made as a claimant's
	// container would be (nil: the reconciler's own).
	Probe *disklimit.Probe
	// MemberEvents has a pool looked at when one of its members dies or
	// goes (nil: only the resync does).
	MemberEvents <-chan event.TypedGenericEvent[*afev1.SandboxPool]

	// ctx bounds the member creations this process starts.
	ctx context.Context
	// making is the creations in flight, and what the refill remembers.
	making making
	// done has a pool looked at when a creation of its member ended.
	done chan event.TypedGenericEvent[*afev1.SandboxPool]
	// ownSubnets hands out the subnets when the manager shares none.
	ownSubnets egressnet.Subnets
	// ownProbe is the disk probe when the manager shares none.
	ownProbe disklimit.Probe
}

// poolScope is what one reconcile of a pool works with.
type poolScope struct {
	pool   *afev1.SandboxPool
	before *afev1.SandboxPool
	// key is the pool's key, the stem of its members' names.
	key string
	// want is the members the pool keeps: its replicas, bounded.
	want int
	// shape is the shape of its template; hash its Hash().
	shape pool.Shape
	hash  string
	// resolved are the inputs of its members' containers.
	resolved sandboxspec.Resolved
	// egressNetwork is the network the proxies of members with egress
	// leave by.
	egressNetwork string
	// members are the pool's members on the engine, as classified.
	members members
}

// member returns the identity of the pool's member of the given name.
func (s *poolScope) member(name, instance string) sandboxspec.MemberIdentity {
	return sandboxspec.MemberIdentity{Namespace: s.pool.Namespace, Pool: s.pool.Name, PoolUID: string(s.pool.UID),
		Instance: instance, Name: name}
}

// Retry timing.
const (
	// resync is how often a pool is looked at without an event: the
	// fallback for a member lost while the event stream was down.
	resync = time.Minute
	// invalidRetry is how often a pool whose template cannot be honoured
	// looks again (a Secret or runtime may appear).
	invalidRetry = 30 * time.Second
)

// SetupWithManager registers the reconciler: SandboxPools (spec changes
// and deletion), the events of their members, and the end of the member
// creations this process starts, which ctx bounds.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	r.ctx = ctx
	r.done = make(chan event.TypedGenericEvent[*afev1.SandboxPool], 256)
	b := ctrl.NewControllerManagedBy(mgr).
		For(&afev1.SandboxPool{}, builder.WithPredicates(writes.SpecOrDeletionChanged(nil))).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(1, r.Config.MaxConcurrentReconciles)}).
		Named("sandboxpool").
		WatchesRawSource(source.Channel(r.done, &handler.TypedEnqueueRequestForObject[*afev1.SandboxPool]{}))
	if r.MemberEvents != nil {
		b = b.WatchesRawSource(source.Channel(r.MemberEvents, &handler.TypedEnqueueRequestForObject[*afev1.SandboxPool]{}))
	}
	return b.Complete(r)
}

// Reconcile brings the unclaimed members of one pool in line with it.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	p := &afev1.SandboxPool{}
	if err := r.Get(ctx, req.NamespacedName, p); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		// Gone without its finalizer's cleanup (removed by hand): its
		// unclaimed members belong to no pool.
		s := &poolScope{pool: &afev1.SandboxPool{}, key: naming.Key(req.Namespace, req.Name)}
		s.pool.Namespace, s.pool.Name = req.Namespace, req.Name
		return r.reconcileGone(ctx, s)
	}
	s := &poolScope{pool: p, before: p.DeepCopy(), key: naming.Key(p.Namespace, p.Name)}
	if !p.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, s)
	}
	if err := writes.EnsureFinalizer(ctx, r.Client, p, afev1.SandboxPoolFinalizer); err != nil {
		return writes.ReconcileResult(ctrl.Result{}, err, nil)
	}
	s.before = p.DeepCopy()
	res, err := r.reconcileNormal(ctx, s)
	return writes.ReconcileResult(res, err, r.commit(ctx, s))
}

// reconcileNormal keeps the pool's members: the template resolved, the
// members listed and classified, the stale ones removed, the refill paced.
func (r *Reconciler) reconcileNormal(ctx context.Context, s *poolScope) (ctrl.Result, error) {
	s.want = max(0, min(int(s.pool.Spec.Replicas), r.Config.MaxPoolReplicas))
	err := r.resolve(ctx, s)
	var ie *sandboxspec.InvalidError
	if errors.As(err, &ie) {
		// No member can be made: those of an earlier template go.
		writes.SetCondition(s.pool, afev1.SandboxPoolReadyCondition, false, ie.Reason, ie.Message)
		s.hash = ""
		if err := r.keep(ctx, s); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{RequeueAfter: invalidRetry}, nil
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.keep(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	after := r.refill(ctx, s)
	setReady(s, r.node(), r.making.inFlight(s.pool.UID), r.Config.MaxPoolReplicas, r.making.failure(s.pool.UID))
	if after == 0 || after > resync {
		after = resync
	}
	return ctrl.Result{RequeueAfter: after}, nil
}

// node is the node whose members this manager keeps, in per-node mode
// (its instance); empty with one engine.
func (r *Reconciler) node() string {
	if r.Config.PerNode {
		return r.Config.Instance
	}
	return ""
}

// resolve validates the pool's template as a Sandbox's and resolves what
// its members' containers need: the disk enforcement, the runtime, the env
// (only with a command: a member on the keep-alive holds none); an
// InvalidError says why no member can be made.
func (r *Reconciler) resolve(ctx context.Context, s *poolScope) error {
	vopts, err := r.Config.Validation()
	if err != nil {
		return err
	}
	tmpl := &s.pool.Spec.Template
	if err := sandboxspec.Validate(tmpl, vopts); err != nil {
		if _, ok := sandboxspec.AsInvalid(err); ok {
			return err
		}
		return &sandboxspec.InvalidError{Reason: afev1.InvalidSpecReason, Message: err.Error()}
	}
	if err := r.resolveDisk(ctx, s); err != nil {
		return err
	}
	if len(tmpl.Egress) > 0 {
		if err := r.resolveEgress(ctx, s); err != nil {
			return err
		}
	}
	name := sandboxspec.RuntimeOf(tmpl, vopts)
	rt, err := r.Engine.Runtime(ctx, name)
	if err != nil {
		if identity.IgnoreEngineNotFound(err) == nil {
			return &sandboxspec.InvalidError{Reason: afev1.RuntimeUnavailableReason,
				Message: fmt.Sprintf("The engine has no runtime %q; retrying", name)}
		}
		return err
	}
	if err := sandboxspec.UsableRuntime(rt); err != nil {
		return err
	}
	s.resolved.Runtime = rt
	var env []string
	if len(tmpl.Command) > 0 {
		sbx := &afev1.Sandbox{Spec: afev1.SandboxSpec{SandboxTemplateSpec: *tmpl}}
		sbx.Namespace = s.pool.Namespace
		if env, err = r.Config.EnvResolver(r.APIReader).Resolve(ctx, sbx); err != nil {
			return err
		}
	}
	s.resolved.Env = env
	s.shape = pool.ShapeOf(tmpl, vopts, env, s.resolved.DiskEnforcement)
	s.hash = s.shape.Hash()
	return nil
}

// resolveDisk sets how a disk-limited template's members are limited, as
// the Sandbox reconciler limits a claimant's container. The disk meter
// measures a member's volumes for the Sandbox whose claim record names it
// (disklimit.Uses), and nothing before: a template with its own command,
// which would write to the member's disk before any claim, is refused.
func (r *Reconciler) resolveDisk(ctx context.Context, s *poolScope) error {
	tmpl := &s.pool.Spec.Template
	if tmpl.Resources.Disk == nil {
		return nil
	}
	if len(tmpl.Command) > 0 {
		return &sandboxspec.InvalidError{Reason: afev1.InvalidSpecReason,
			Message: "A template with resources.disk and its own command is not pooled: the command would write to a member's disk before any claim, when no limit is measured; remove spec.template.command or resources.disk (a Sandbox of this template is created cold)"}
	}
	mode, err := r.diskProbe().Enforcement(ctx, r.Engine)
	if err != nil {
		return err
	}
	s.resolved.DiskEnforcement = mode
	return nil
}

// diskProbe is the manager's probe when it shares one (Probe), else the
// reconciler's own.
func (r *Reconciler) diskProbe() *disklimit.Probe {
	if r.Probe != nil {
		return r.Probe
	}
	return &r.ownProbe
}

// resolveEgress finds the controller's --egress-network, which the
// members' proxies leave by, under the name the Sandbox reconciler gives
// the proxies it makes (their spec-hash names it).
func (r *Reconciler) resolveEgress(ctx context.Context, s *poolScope) error {
	n, err := r.Engine.InspectNetwork(ctx, r.Config.EgressNetwork)
	if errors.Is(err, docker.ErrNotFound) {
		return &sandboxspec.InvalidError{Reason: afev1.EgressNetworkMissingReason,
			Message: fmt.Sprintf("The controller's --egress-network %s does not exist on the engine; retrying", r.Config.EgressNetwork)}
	}
	if err != nil {
		return err
	}
	s.egressNetwork = n.Name
	return nil
}

// reconcileDelete removes every unclaimed member of a pool being deleted,
// then its finalizer. Creations in flight end first.
func (r *Reconciler) reconcileDelete(ctx context.Context, s *poolScope) (ctrl.Result, error) {
	if n := r.making.inFlight(s.pool.UID); n > 0 {
		return ctrl.Result{RequeueAfter: pool.BusyRecheck}, nil
	}
	s.hash = ""
	if err := r.keep(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	if _, err := writes.RemoveFinalizer(ctx, r.Client, s.pool, afev1.SandboxPoolFinalizer); err != nil {
		return writes.ReconcileResult(ctrl.Result{}, err, nil)
	}
	r.making.forget(s.pool.UID)
	metrics.ForgetPool(s.pool.Namespace, s.pool.Name)
	return ctrl.Result{}, nil
}

// reconcileGone removes the unclaimed members of a pool that no longer
// exists.
func (r *Reconciler) reconcileGone(ctx context.Context, s *poolScope) (ctrl.Result, error) {
	if err := r.keep(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	metrics.ForgetPool(s.pool.Namespace, s.pool.Name)
	return ctrl.Result{}, nil
}

// commit writes the pool's status once, over the version the reconcile
// read, with the claims and misses counted since the last one.
func (r *Reconciler) commit(ctx context.Context, s *poolScope) error {
	p := s.pool
	p.Status.ObservedGeneration = p.Generation
	claims, misses := r.Counts.Take(p.Namespace, p.Name)
	p.Status.Claims += claims
	p.Status.Misses += misses
	_, err := writes.PatchStatus(ctx, r.Client, s.before, p, afev1.SandboxPoolFinalizer,
		func(p *afev1.SandboxPool) any { return p.Status })
	if err != nil {
		r.Counts.Add(p.Namespace, p.Name, claims, misses) // for the next write
	}
	return err
}
