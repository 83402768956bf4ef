package pool

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/controllers/egressnet"
	"afe.dev/sandbox/controllers/hostids"
	"afe.dev/sandbox/controllers/identity"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/crashpoint"
	"afe.dev/sandbox/internal/naming"
	"afe.dev/sandbox/internal/pool"
	"afe.dev/sandbox/internal/sandboxspec"
)

// members are a pool's member containers on the engine, as keep found
// them.
type members struct {
	// ready are the unclaimed members a Sandbox may take, oldest first.
	ready []docker.Container
	// inUse are the member names whose volume must stay: every member
	// container's, claimed or not, and those a claim record names.
	inUse map[string]bool
	// making are the members keep found being made: one whose making has
	// ended since is counted by the refill as ready (madeSince).
	making []string
}

// keep lists the pool's members and removes, under the pool's turn, the
// unclaimed ones that can serve no Sandbox: made for an earlier pool of the
// name, for another template (any, when s.hash is empty: the pool is going
// or its template cannot be honoured), exited or lost, or beyond the
// replicas wanted; then the member volumes no member and no claim uses. A
// member a claim record names is the claim's to decide, and a claimed
// member (renamed to its Sandbox's name) the Sandbox's.
func (r *Reconciler) keep(ctx context.Context, s *poolScope) error {
	unlock := r.Turns.Lock(s.pool.Namespace, s.pool.Name)
	defer unlock()
	sel := s.member("", r.Config.Instance).PoolSelector("")
	containers, err := r.Engine.ListContainers(ctx, withRole(sel, afev1.RoleMember))
	if err != nil {
		return err
	}
	records, err := r.Engine.ListVolumes(ctx, withRole(sel, afev1.RoleClaim))
	if err != nil {
		return err
	}
	claiming := map[string]bool{}
	s.members = members{inUse: map[string]bool{}}
	for _, v := range records {
		claiming[v.Labels[afev1.LabelMember]] = true
		s.members.inUse[v.Labels[afev1.LabelMemberName]] = true
	}
	proxies, err := r.unclaimedProxies(ctx, sel)
	if err != nil {
		return err
	}
	var stale []docker.Container
	for _, c := range containers {
		if helperLeft(c, r.making.isMaking) {
			logf.FromContext(ctx).Info("Removing the chown helper of no member being made", "container", c.Name)
			stale = append(stale, c)
			continue
		}
		s.members.inUse[c.Labels[afev1.LabelMemberName]] = true
		if _, unclaimed := naming.MemberID(s.key, c.Name); !unclaimed || claiming[c.ID] ||
			c.Labels[afev1.LabelMemberName] != c.Name {
			continue // claimed, or being claimed
		}
		if r.making.isMaking(c.Name) {
			s.members.making = append(s.members.making, c.Name)
			continue
		}
		if why := unfit(s, c, proxies[naming.MemberProxy(c.Name)]); why != "" {
			logf.FromContext(ctx).Info("Removing a pool member", "member", c.Name, "why", why)
			stale = append(stale, c)
			continue
		}
		s.members.ready = append(s.members.ready, c)
	}
	slices.SortFunc(s.members.ready, func(a, b docker.Container) int { return a.Created.Compare(b.Created) })
	if extra := len(s.members.ready) - s.want; s.hash != "" && extra > 0 {
		// The newest go: the oldest are claimed first.
		stale = append(stale, s.members.ready[len(s.members.ready)-extra:]...)
		s.members.ready = s.members.ready[:len(s.members.ready)-extra]
	}
	var errs []error
	for _, c := range stale {
		errs = append(errs, r.removeMember(ctx, s, c.ID, c.Name))
	}
	return errors.Join(append(errs, r.removeUnused(ctx, s, sel))...)
}

// helperLeft is true for the chown helper of a member (one with a disk
// limit, made with a read-only root: docker.ChownHelperName) that no
// creation of this process is making: a crash in the middle left it.
func helperLeft(c docker.Container, making func(string) bool) bool {
	member := c.Labels[afev1.LabelMemberName]
	return member != "" && c.Name == docker.ChownHelperName(member) && !making(member)
}

// unclaimedProxies are the proxies of the pool's members that still bear
// their member's name, by name: a claimed member's bears its Sandbox's.
func (r *Reconciler) unclaimedProxies(ctx context.Context, sel map[string]string) (map[string]docker.Container, error) {
	list, err := r.Engine.ListContainers(ctx, withRole(sel, afev1.RoleProxy))
	if err != nil {
		return nil, err
	}
	out := make(map[string]docker.Container, len(list))
	for _, c := range list {
		if c.Name == naming.MemberProxy(c.Labels[afev1.LabelMemberName]) {
			out[c.Name] = c
		}
	}
	return out, nil
}

// unfit says why an unclaimed member can serve no Sandbox of the pool;
// empty when it can. proxy is the member's proxy, when it has one.
func unfit(s *poolScope, c docker.Container, proxy docker.Container) string {
	switch {
	case c.Labels[afev1.LabelPoolUID] != string(s.pool.UID) || s.pool.UID == "":
		return "made for an earlier pool of this name"
	case s.hash == "":
		return "the pool is going, or its template cannot be honoured"
	case c.Labels[afev1.LabelSpecHash] != s.hash:
		return "made for another template"
	case s.pool.Spec.Template.User == "" && c.Labels[afev1.LabelUser] == "":
		return "it carries no host id of its own"
	case !c.Running:
		return "it exited or was lost before a claim"
	case s.shape.Egress && !proxy.Running:
		return "its proxy exited or was lost before a claim"
	}
	return ""
}

// removeUnused removes the pool's member objects that no member container
// and no claim record uses, nor a creation in flight: what a crash between
// the creation of a member's first object and its container's left, and
// what stayed of a member removed by hand. Proxies go first, then
// networks (which their containers must have left), then volumes (member
// workspaces and those of the image's VOLUME paths).
func (r *Reconciler) removeUnused(ctx context.Context, s *poolScope, sel map[string]string) error {
	unused := func(labels map[string]string) bool {
		name := labels[afev1.LabelMemberName]
		return name != "" && !s.members.inUse[name] && !r.making.isMaking(name)
	}
	proxies, err := r.Engine.ListContainers(ctx, withRole(sel, afev1.RoleProxy))
	if err != nil {
		return err
	}
	var errs []error
	for _, c := range proxies {
		if unused(c.Labels) {
			logf.FromContext(ctx).Info("Removing a proxy of no pool member", "container", c.Name)
			errs = append(errs, identity.IgnoreEngineNotFound(r.Engine.RemoveContainer(ctx, c.ID)))
		}
	}
	errs = append(errs, r.removeNetworks(ctx, withRole(sel, afev1.RoleNetwork), func(n docker.Network) bool { return !unused(n.Labels) }))
	for _, role := range []string{afev1.RoleWorkspace, afev1.RoleImageVolume} {
		volumes, err := r.Engine.ListVolumes(ctx, withRole(sel, role))
		if err != nil {
			return err
		}
		for _, v := range volumes {
			if unused(v.Labels) {
				logf.FromContext(ctx).Info("Removing a volume of no pool member", "volume", v.Name)
				errs = append(errs, identity.IgnoreEngineNotFound(r.Engine.RemoveVolume(ctx, v.Name)))
			}
		}
	}
	return errors.Join(errs...)
}

// removeMember removes an unclaimed member's container, by the ID it was
// listed with, then its other objects (removeMemberObjects).
func (r *Reconciler) removeMember(ctx context.Context, s *poolScope, id, name string) error {
	if err := identity.IgnoreEngineNotFound(r.Engine.RemoveContainer(ctx, id)); err != nil {
		return err
	}
	return r.removeMemberObjects(ctx, s, name)
}

// removeMemberObjects removes the objects that carry the labels of the
// pool's member of the name, but its container: its proxy, then its
// network, then its volumes (its workspace, and those of its image's
// VOLUME paths).
func (r *Reconciler) removeMemberObjects(ctx context.Context, s *poolScope, name string) error {
	sel := s.member("", r.Config.Instance).PoolSelector("")
	sel[afev1.LabelMemberName] = name
	if err := identity.RemoveContainers(ctx, r.Engine, withRole(sel, afev1.RoleProxy)); err != nil {
		return err
	}
	if err := r.removeNetworks(ctx, withRole(sel, afev1.RoleNetwork), nil); err != nil {
		return err
	}
	return identity.RemoveVolumes(ctx, r.Engine, sel)
}

// removeNetworks removes the networks carrying all the labels, but those
// keep says to keep.
func (r *Reconciler) removeNetworks(ctx context.Context, labels map[string]string, keep func(docker.Network) bool) error {
	networks, err := r.Engine.ListNetworks(ctx, labels)
	if err != nil {
		return err
	}
	var errs []error
	for _, n := range networks {
		if keep == nil || !keep(n) {
			errs = append(errs, identity.IgnoreEngineNotFound(r.Engine.RemoveNetwork(ctx, n.ID)))
		}
	}
	return errors.Join(errs...)
}

func withRole(sel map[string]string, role string) map[string]string {
	out := make(map[string]string, len(sel)+1)
	for k, v := range sel {
		out[k] = v
	}
	out[afev1.LabelRole] = role
	return out
}

// refill starts the members the pool lacks, as many as pool.Refill allows
// now, and returns when to look again (zero: when something changes).
func (r *Reconciler) refill(ctx context.Context, s *poolScope) time.Duration {
	if wait := r.making.backoff(s.pool.UID, time.Now()); wait > 0 {
		return wait
	}
	st := r.making.state(s.pool.UID)
	plan := pool.Refill(pool.RefillState{Replicas: int32(s.want), MaxReplicas: r.Config.MaxPoolReplicas,
		Ready: len(s.members.ready) + r.madeSince(s), Creating: st.creating, EngineCreating: st.engine,
		ColdInFlight: r.Cold.Count(), ClaimsInFlight: r.Claims.Count(), LastCreation: st.last, Now: time.Now()})
	for i := 0; i < plan.Start; i++ {
		name := naming.Member(s.key, newMemberID())
		r.making.start(s.pool.UID, name, time.Now())
		// The creation outlives the reconcile, whose status write
		// overwrites the pool it holds: it gets a copy of its own.
		own := *s
		own.pool = s.pool.DeepCopy()
		go r.make(ctx, &own, name)
	}
	return plan.After
}

// madeSince counts the members keep found being made whose making has
// ended since: ready now (or gone, which their end's event says), and no
// longer counted as being made. Without them a refill between the two
// would start a member too many.
func (r *Reconciler) madeSince(s *poolScope) int {
	n := 0
	for _, name := range s.members.making {
		if !r.making.isMaking(name) {
			n++
		}
	}
	return n
}

func newMemberID() string {
	id, err := naming.NewMemberID(rand.Reader)
	if err != nil {
		panic(fmt.Sprintf("read random bytes: %v", err)) // crypto/rand does not fail
	}
	return id
}

// make makes one member, in the background, and has its pool looked at
// when it is done. A member that could not be made leaves nothing behind,
// and the pool's next one waits (making.failed).
func (r *Reconciler) make(ctx context.Context, s *poolScope, name string) {
	log := logf.FromContext(ctx).WithValues("member", name)
	err := r.makeMember(logf.IntoContext(r.ctx, log), s, name)
	r.making.end(s.pool.UID, name, err, time.Now())
	if err != nil && r.ctx.Err() == nil {
		log.Error(err, "Make a pool member")
		r.Recorder.Eventf(s.pool, nil, corev1.EventTypeWarning, "MemberFailed", "Create",
			"Member %s could not be made: %v", name, err)
	}
	p := &afev1.SandboxPool{}
	p.Namespace, p.Name = s.pool.Namespace, s.pool.Name
	select {
	case r.done <- event.TypedGenericEvent[*afev1.SandboxPool]{Object: p}:
	default: // the queue is full of this news already; the resync follows
	}
}

// CrashMemberVolumeMade is the point of a member's creation where a crash
// leaves its workspace volume with no container (internal/crashpoint).
const CrashMemberVolumeMade = "member-volume-made"

// makeMember makes the member's workspace volume, its network and proxy
// when the template has egress, and its container, under an id of its own
// when the template names no user, its disk limited as a claimant's would
// be (an engine that refuses a storage quota is told to the disk probe);
// on failure it removes what it made (the
// engine's RunContainer leaves no container behind, and the volumes of the
// image's VOLUME paths go with the next keep).
func (r *Reconciler) makeMember(ctx context.Context, s *poolScope, name string) error {
	m := s.member(name, r.Config.Instance)
	resolved := s.resolved
	if s.shape.Egress {
		resolved.Network = naming.MemberNetwork(name)
		resolved.ProxyEnv = sandboxspec.ProxyEnvFor()
	}
	var id *hostids.Reservation
	if s.pool.Spec.Template.User == "" {
		vopts, err := r.Config.Validation()
		if err != nil {
			return err
		}
		if id, err = r.IDs.Reserve(ctx, r.Engine, hostids.HolderOf(m.Labels(afev1.RoleMember)), "", vopts); err != nil {
			return err
		}
		defer id.Release()
		resolved.User = id.User
	}
	err := r.Engine.EnsureImage(ctx, s.pool.Spec.Template.Image)
	if err == nil {
		_, err = r.Engine.EnsureVolume(ctx, sandboxspec.MemberVolume(m))
		crashpoint.Here(CrashMemberVolumeMade)
	}
	if err == nil && s.shape.Egress {
		resolved.ProxyAddress, resolved.Address, err = r.makeEgress(ctx, s, m)
	}
	var created *docker.Container
	if err == nil {
		created, err = r.Engine.RunContainer(ctx, sandboxspec.Member(&s.pool.Spec.Template, m, resolved, s.hash))
		if errors.Is(err, docker.ErrStorageQuotaUnsupported) {
			// As for a cold sandbox: the next members (and claimants) get
			// a read-only root, a shape of its own.
			r.diskProbe().Refused(ctx)
		}
	}
	if err == nil && id != nil {
		// Verify removes the container when another instance's took the id
		// at the same moment.
		err = id.Verify(ctx, r.Engine, created)
	}
	if err != nil {
		_ = r.removeMemberObjects(context.WithoutCancel(ctx), s, name)
	}
	return err
}

// makeEgress makes a member's internal network, on a free block of
// --egress-subnets, and its proxy, admitting nothing until a Sandbox claims
// the member (sandboxspec.NoHosts), and waits until the proxy answers: a
// member is ready only once its egress is. It returns the proxy's address
// on the network, which the member's /etc/hosts names, and the member's
// own fixed address there ("" for the engine's choice).
func (r *Reconciler) makeEgress(ctx context.Context, s *poolScope, m sandboxspec.MemberIdentity) (proxyAddr, own string, err error) {
	subnets := r.Subnets
	if subnets == nil {
		subnets = &r.ownSubnets
	}
	network, err := subnets.Create(ctx, r.Engine, r.Config.EgressSubnets, sandboxspec.MemberNetwork(m))
	if err != nil {
		return "", "", fmt.Errorf("make the member's network: %w", err)
	}
	if err := egressnet.BoundNetwork(ctx, r.Config.ConnLimits, network); err != nil {
		return "", "", err
	}
	opts := r.proxyOptions(s)
	opts.Address = egressnet.FixedProxyAddress(r.Config.EgressSubnets, network)
	none, err := sandboxspec.NoHosts(opts)
	if err != nil {
		return "", "", fmt.Errorf("render the member's proxy configuration: %w", err)
	}
	spec := sandboxspec.MemberProxy(&s.pool.Spec.Template, m, opts, none)
	if err := r.Engine.EnsureImage(ctx, spec.Image); err != nil {
		return "", "", err
	}
	proxy, err := r.Engine.RunContainer(ctx, spec)
	if err != nil {
		return "", "", fmt.Errorf("start the member's proxy: %w", err)
	}
	if err := egressnet.BoundProxy(ctx, r.Config.ConnLimits, proxy, s.egressNetwork); err != nil {
		return "", "", err
	}
	if err := egressnet.WaitProxy(ctx, r.Engine, proxy); err != nil {
		return "", "", fmt.Errorf("proxy %s does not answer: %w", proxy.Name, err)
	}
	return egressnet.ProxyAddressOn(proxy, network.Name), sandboxspec.SandboxAddress(opts.Address), nil
}

// proxyOptions are the options of a member's proxy. It admits nothing
// before its claim, which gives it the Sandbox's allowlist (with the host's
// addresses to refuse) in place.
func (r *Reconciler) proxyOptions(s *poolScope) sandboxspec.ProxyOptions {
	return sandboxspec.ProxyOptions{Image: r.Config.ProxyImage, EgressNetwork: s.egressNetwork,
		AllowPrivate: r.Config.EgressAllowPrivate}
}
