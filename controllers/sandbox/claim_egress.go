package sandbox

import (
	"context"
	"errors"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/controllers/identity"
	"afe.dev/sandbox/controllers/writes"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/crashpoint"
	"afe.dev/sandbox/internal/naming"
	"afe.dev/sandbox/internal/pool"
	"afe.dev/sandbox/internal/sandboxspec"
)

// CrashProxyRenamed is the point of a claim with egress where a crash
// leaves the member's proxy bearing the Sandbox's proxy name and admitting
// nothing yet (internal/crashpoint).
const CrashProxyRenamed = "claim-proxy-renamed"

// claimedEgress is the egress phase of a sandbox served from a pool. A
// member of a template with egress was made with its internal network and
// its proxy, admitting nothing; the claim renames the proxy to the
// Sandbox's proxy name and installs the Sandbox's allowlist in it, in
// place, through the proxy's stdin, which the workload cannot reach
// (ensureAdmits). The
// network keeps the member's name: the engine cannot rename one. Each
// object is the Sandbox's only as its claim record binds it
// (pool.MemberObjectOf, pool.BindsProxy), never by a status field.
func (r *Reconciler) claimedEgress(ctx context.Context, s *sandboxScope) (ctrl.Result, error) {
	sbx := s.sbx
	network, err := identity.ClaimedNetwork(ctx, r.Engine, s.id, s.claimed.record)
	if err != nil && !errors.Is(err, docker.ErrNotFound) {
		return ctrl.Result{}, err
	}
	switch {
	case network == nil && len(sbx.Spec.Egress) == 0:
		s.resolved.Network = "none"
		writes.SetCondition(sbx, afev1.EgressReadyCondition, true, afev1.NoEgressReason, "The sandbox has no network")
		return ctrl.Result{}, nil
	case network == nil:
		// Its template had no egress (the spec changed since the claim), or
		// its network was removed by hand: a member cannot be given one.
		writes.SetCondition(sbx, afev1.EgressReadyCondition, false, afev1.PoolDriftNotAppliedReason,
			fmt.Sprintf("Container %s, a member of pool %s, has no network of its own for the egress the spec declares: delete and create the Sandbox again to apply it",
				s.claimed.container.Name, sbx.Status.Pool))
		return ctrl.Result{}, nil
	}
	sbx.Status.NetworkName = network.Name
	opts, res, err := r.proxyOptions(ctx, s, network)
	if opts == nil {
		return res, err
	}
	member := pool.MemberOf(s.id, s.claimed.record)
	if err := r.adoptMemberProxy(ctx, s, member.Name); err != nil {
		return ctrl.Result{}, err
	}
	// Without egress in the spec (changed since the claim) the allowlist
	// admits nothing: the member keeps its network.
	ready, res, err := r.serveProxy(ctx, s, network.Name, *opts, func(allow sandboxspec.Allowlist) docker.ContainerSpec {
		want := sandboxspec.MemberProxy(&sbx.Spec.SandboxTemplateSpec, member, *opts, allow)
		want.Name = naming.Proxy(s.id.Key) // its spec-hash stays the member's
		return want
	})
	switch {
	case !ready:
		return res, err
	case len(sbx.Spec.Egress) == 0:
		writes.SetCondition(sbx, afev1.EgressReadyCondition, true, afev1.NoEgressReason,
			fmt.Sprintf("Proxy %s admits nothing: the spec declares no egress, and container %s, a member of pool %s, keeps its network",
				naming.Proxy(s.id.Key), s.claimed.container.Name, sbx.Status.Pool))
	default:
		setEgressReady(s)
	}
	return ctrl.Result{}, nil
}

// adoptMemberProxy renames the claimed member's proxy to the Sandbox's
// proxy name while it still bears the member's. Idempotent: after a crash
// the proxy bears one name or the other. A proxy of the member's name whose
// labels are not those of the member the record names is left alone; one
// lost is made again by ensureProxy. What it found under the Sandbox's
// proxy name, or renamed to it, is s.proxy: the one inspection of the
// proxy in this reconcile.
func (r *Reconciler) adoptMemberProxy(ctx context.Context, s *sandboxScope, member string) error {
	named, err := r.Engine.InspectContainer(ctx, naming.Proxy(s.id.Key))
	if err == nil {
		s.proxy = named // renamed already: ensureProxy judges what bears the name
	}
	if !errors.Is(err, docker.ErrNotFound) {
		return err
	}
	c, err := r.Engine.InspectContainer(ctx, naming.MemberProxy(member))
	if err != nil {
		return identity.IgnoreEngineNotFound(err)
	}
	if !pool.MemberObjectOf(s.id, s.claimed.record, c.Labels, afev1.RoleProxy) {
		return nil
	}
	// By name, as the engine renames; what then bears the Sandbox's proxy
	// name is verified again (ensureProxy: pool.BindsProxy).
	err = r.Engine.RenameContainer(ctx, c.Name, naming.Proxy(s.id.Key))
	if errors.Is(err, docker.ErrNotFound) || errors.Is(err, docker.ErrConflict) {
		return nil // the next look reads what the engine has now
	}
	if err != nil {
		return err
	}
	s.claimingProxy = true
	crashpoint.Here(CrashProxyRenamed)
	logf.FromContext(ctx).Info("Claimed the member's proxy", "container", naming.Proxy(s.id.Key))
	// The rename changes the name only: the container inspected is the
	// one that now bears the Sandbox's proxy name.
	c.Name = naming.Proxy(s.id.Key)
	s.proxy = c
	return nil
}

// removeMemberEgress removes the proxy of a member a record (or, for an
// orphan, the member's own labels) names, under the Sandbox's proxy name
// or the member's, when its labels make it that member's proxy; then the
// member's network, likewise.
func (r *Reconciler) removeMemberEgress(ctx context.Context, s *sandboxScope, member string, want map[string]string) error {
	for _, name := range []string{naming.Proxy(s.id.Key), naming.MemberProxy(member)} {
		c, err := r.Engine.InspectContainer(ctx, name)
		if errors.Is(err, docker.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if c.Labels[afev1.LabelMemberName] == member && pool.MemberObjectOf(s.id, want, c.Labels, afev1.RoleProxy) {
			if err := identity.IgnoreEngineNotFound(r.Engine.RemoveContainer(ctx, c.ID)); err != nil {
				return err
			}
		}
	}
	n, err := r.Engine.InspectNetwork(ctx, naming.MemberNetwork(member))
	if err != nil {
		return identity.IgnoreEngineNotFound(err)
	}
	if n.Labels[afev1.LabelMemberName] != member || !pool.MemberObjectOf(s.id, want, n.Labels, afev1.RoleNetwork) {
		return nil
	}
	return identity.IgnoreEngineNotFound(r.Engine.RemoveNetwork(ctx, n.ID))
}
