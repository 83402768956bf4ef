// Package loops holds the manager's background loops, which reconcile
// nothing themselves and feed the reconcilers: the sweeper, the usage
// collector, the engine's event source, the host address watch and the
// telemetry pruner.
package loops

import (
	"context"
	"errors"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/controllers/identity"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/connlimit"
	"afe.dev/sandbox/internal/naming"
)

// Sweeper periodically looks at every labelled Docker object of this
// controller instance at once, in one list request per kind. It removes the
// objects whose Sandbox no longer exists (leftovers of a crash, of a
// finalizer removed by hand, or of a Sandbox deleted while the controller was
// away), and it is the fallback of the event stream: a Ready Sandbox whose
// container or proxy is not running is queued for a reconcile. Between two
// sweeps a Ready sandbox costs no Docker request at all.
type Sweeper struct {
	Client   client.Reader
	Cache    cache.Cache
	Engine   SweepEngine
	Instance string
	Period   time.Duration
	// Enqueue asks for a reconcile of the Sandbox namespace/name.
	Enqueue func(namespace, name string)
	// Here is true for a Sandbox this manager runs (per-node mode: one
	// placed on its node); nil: every Sandbox. Only those are resynced:
	// another node's sandbox runs nothing on this engine.
	Here func(ctx context.Context, sbx *afev1.Sandbox) bool
	// EnqueuePool asks for a reconcile of the SandboxPool namespace/name
	// (nil: pools are not looked at).
	EnqueuePool func(namespace, name string)
	// ConnLimits is the host's conntrack bound, kept to the instance's
	// networks and proxies (nil: none); EgressNetwork is where the
	// proxies' addresses are read.
	ConnLimits    *connlimit.Host
	EgressNetwork string
}

// NeedLeaderElection is true: only the leader removes objects.
func (s *Sweeper) NeedLeaderElection() bool { return true }

// Start sweeps at once, then every Period, until ctx ends.
func (s *Sweeper) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("sweep")
	if !s.Cache.WaitForCacheSync(ctx) {
		return nil
	}
	for {
		if err := sweepAndResync(ctx, s.Client, s.Engine, map[string]string{afev1.LabelController: s.Instance}, s.resync(ctx)); err != nil && ctx.Err() == nil {
			log.Error(err, "Sweep of orphaned Docker objects")
		}
		if err := s.orphanedMembers(ctx); err != nil && ctx.Err() == nil {
			log.Error(err, "Sweep of the members of pools that are gone")
		}
		if err := s.syncConnLimits(ctx); err != nil && ctx.Err() == nil {
			log.Error(err, "Sync of the conntrack bound's table", "table", s.ConnLimits.TableName())
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(s.Period):
		}
	}
}

// resync is the enqueue of sweepAndResync: the Sandboxes Here passes.
func (s *Sweeper) resync(ctx context.Context) func(*afev1.Sandbox) bool {
	return func(sbx *afev1.Sandbox) bool {
		if s.Here != nil && !s.Here(ctx, sbx) {
			return false
		}
		s.Enqueue(sbx.Namespace, sbx.Name)
		return true
	}
}

// orphanedMembers has the pool of every member whose pool is gone looked
// at: the SandboxPool reconciler removes the unclaimed members of a pool
// that no longer exists (one whose finalizer was removed by hand while the
// manager was away is reconciled by no event).
func (s *Sweeper) orphanedMembers(ctx context.Context) error {
	if s.EnqueuePool == nil {
		return nil
	}
	members, err := s.Engine.ListContainers(ctx, map[string]string{afev1.LabelController: s.Instance, afev1.LabelRole: afev1.RoleMember})
	if err != nil || len(members) == 0 {
		return err
	}
	pools := &afev1.SandboxPoolList{}
	if err := s.Client.List(ctx, pools); err != nil {
		return err
	}
	live := map[string]bool{}
	for i := range pools.Items {
		live[string(pools.Items[i].UID)] = true
	}
	asked := map[string]bool{}
	for _, m := range members {
		ns, name := m.Labels[afev1.LabelNamespace], m.Labels[afev1.LabelPool]
		if !live[m.Labels[afev1.LabelPoolUID]] && !asked[ns+"/"+name] {
			asked[ns+"/"+name] = true
			s.EnqueuePool(ns, name)
		}
	}
	return s.unboundMembers(ctx, members)
}

// unboundMembers removes the claimed members (renamed from their pool
// name) that no claim record names, never a member's chown helper
// (docker.ChownHelperName), which bears another name than its member's
// and no record names either: their Sandbox went without its
// cleanup (a finalizer removed by hand), whose record the sweep removed.
// The containers are listed before the records, and a claim writes its
// record before the rename and removes it after the member: a renamed
// member listed here whose record is missing from the later list is gone,
// or going.
func (s *Sweeper) unboundMembers(ctx context.Context, members []docker.Container) error {
	records, err := s.Engine.ListVolumes(ctx, map[string]string{afev1.LabelController: s.Instance, afev1.LabelRole: afev1.RoleClaim})
	if err != nil {
		return err
	}
	bound := map[string]bool{}
	for _, v := range records {
		bound[v.Labels[afev1.LabelMember]] = true
	}
	var errs []error
	for _, m := range members {
		member := m.Labels[afev1.LabelMemberName]
		if member == "" || m.Name == member || bound[m.ID] || m.Name == docker.ChownHelperName(member) {
			// Unclaimed, bound, or the helper of a member being made with
			// a read-only root (a disk limit): not a claimed member. A
			// helper a crash left is the pool's to remove.
			continue
		}
		logf.FromContext(ctx).Info("Removing a claimed pool member no claim binds", "container", m.Name)
		errs = append(errs, s.Engine.RemoveContainer(ctx, m.ID), s.removeMemberObjects(ctx, m.Labels[afev1.LabelNamespace], member))
	}
	return errors.Join(errs...)
}

// removeMemberObjects removes, by the labels the pool gave them, the proxy,
// the network and the workspace of a member whose container went.
func (s *Sweeper) removeMemberObjects(ctx context.Context, namespace, member string) error {
	sel := func(role string) map[string]string {
		return map[string]string{afev1.LabelController: s.Instance, afev1.LabelNamespace: namespace,
			afev1.LabelMemberName: member, afev1.LabelRole: role}
	}
	if err := identity.RemoveContainers(ctx, s.Engine, sel(afev1.RoleProxy)); err != nil {
		return err
	}
	networks, err := s.Engine.ListNetworks(ctx, sel(afev1.RoleNetwork))
	if err != nil {
		return err
	}
	for _, n := range networks {
		if err := s.Engine.RemoveNetwork(ctx, n.ID); err != nil {
			return err
		}
	}
	return identity.RemoveVolumes(ctx, s.Engine, sel(afev1.RoleWorkspace))
}

// SweepTicket removes the labelled Docker objects of the finished or deleted
// ticket that no Sandbox owns, its snapshots too unless it retains them
// (retainedSnapshot), and lists the snapshot volumes it keeps.
func (s *Sweeper) SweepTicket(ctx context.Context, tk *afev1.Ticket) ([]string, error) {
	if err := sweep(ctx, s.Client, s.Engine, map[string]string{
		afev1.LabelController: s.Instance,
		afev1.LabelNamespace:  tk.Namespace,
		afev1.LabelTicket:     tk.Name,
	}); err != nil {
		return nil, err
	}
	return retainedSnapshots(ctx, s.Engine, tk, s.Instance)
}

// sweep removes the Docker objects carrying the labels whose afe.sandbox-uid
// is no existing Sandbox's: containers first, then networks, then volumes.
// Objects without an afe.sandbox-uid label are never touched.
func sweep(ctx context.Context, c client.Reader, engine SweepEngine, labels map[string]string) error {
	return sweepAndResync(ctx, c, engine, labels, nil)
}

// sweepAndResync sweeps, and passes to enqueue every Ready Sandbox whose
// containers are not all running (enqueue is false for one it leaves).
func sweepAndResync(ctx context.Context, c client.Reader, engine SweepEngine, labels map[string]string, enqueue func(*afev1.Sandbox) bool) error {
	log := logf.FromContext(ctx)
	// Docker first, Sandboxes second: an object listed was made for a
	// Sandbox the cache already held, so it is in the later list.
	containers, err := engine.ListContainers(ctx, labels)
	if err != nil {
		return err
	}
	networks, err := engine.ListNetworks(ctx, labels)
	if err != nil {
		return err
	}
	volumes, err := engine.ListVolumes(ctx, labels)
	if err != nil {
		return err
	}
	list := &afev1.SandboxList{}
	if err := c.List(ctx, list); err != nil {
		return err
	}
	live := map[string]bool{}
	for i := range list.Items {
		live[string(list.Items[i].UID)] = true
	}
	if enqueue != nil {
		resyncSandboxes(ctx, list.Items, containers, enqueue)
	}
	orphan := func(l map[string]string) bool {
		uid := l[afev1.LabelSandboxUID]
		return uid != "" && !live[uid]
	}
	var errs []error
	for _, ct := range containers {
		if orphan(ct.Labels) {
			log.Info("Removing orphaned container", "container", ct.Name, "sandbox", ct.Labels[afev1.LabelNamespace]+"/"+ct.Labels[afev1.LabelSandbox])
			errs = append(errs, engine.RemoveContainer(ctx, ct.ID))
		}
	}
	for _, n := range networks {
		if orphan(n.Labels) {
			log.Info("Removing orphaned network", "network", n.Name)
			errs = append(errs, engine.RemoveNetwork(ctx, n.ID))
		}
	}
	for _, v := range volumes {
		if orphan(v.Labels) && !retainedSnapshot(ctx, c, v.Labels) {
			log.Info("Removing orphaned volume", "volume", v.Name)
			errs = append(errs, engine.RemoveVolume(ctx, v.Name))
		}
	}
	return errors.Join(errs...)
}

// resyncSandboxes passes to enqueue the Ready Sandboxes whose containers
// are not all running, and those whose status names objects not their own.
func resyncSandboxes(ctx context.Context, sandboxes []afev1.Sandbox, containers []docker.Container, enqueue func(*afev1.Sandbox) bool) {
	log := logf.FromContext(ctx)
	for _, sbx := range notRunning(sandboxes, containers) {
		if enqueue(sbx) {
			log.Info("Sandbox container not running; reconciling", "sandbox", sbx.Namespace+"/"+sbx.Name)
		}
	}
	for _, sbx := range statusForged(sandboxes, containers) {
		if enqueue(sbx) {
			log.Info("Sandbox status names objects that are not its own; reconciling", "sandbox", sbx.Namespace+"/"+sbx.Name)
		}
	}
}

// notRunning returns the Ready Sandboxes among sandboxes whose container, or
// proxy when they have egress, is not among the running containers.
func notRunning(sandboxes []afev1.Sandbox, containers []docker.Container) []*afev1.Sandbox {
	running := map[string]bool{} // uid/role
	claimed := map[string]bool{} // the names of running members and their proxies, claimed or not
	for _, ct := range containers {
		if ct.Running {
			running[ct.Labels[afev1.LabelSandboxUID]+"/"+ct.Labels[afev1.LabelRole]] = true
			if ct.Labels[afev1.LabelPoolUID] != "" {
				claimed[ct.Name] = true
			}
		}
	}
	var out []*afev1.Sandbox
	for i := range sandboxes {
		sbx := &sandboxes[i]
		if !sbx.DeletionTimestamp.IsZero() || !meta.IsStatusConditionTrue(sbx.Status.Conditions, afev1.SandboxReadyCondition) {
			continue
		}
		uid := string(sbx.UID)
		// A sandbox served from a pool runs on the member bearing its name
		// (which member, its claim record says: this is only a resync).
		key := naming.Key(sbx.Namespace, sbx.Name)
		ok := running[uid+"/"+afev1.RoleSandbox] || claimed[naming.Container(key)]
		if !ok || (len(sbx.Spec.Egress) > 0 && !running[uid+"/"+afev1.RoleProxy] && !claimed[naming.Proxy(key)]) {
			out = append(out, sbx)
		}
	}
	return out
}

// statusForged returns the Sandboxes whose status names Docker objects other
// than their own: written by someone else than the controller (anyone who
// may write sandboxes/status can). Nothing acts on those fields; a reconcile
// writes them again.
func statusForged(sandboxes []afev1.Sandbox, containers []docker.Container) []*afev1.Sandbox {
	ids := map[string]string{} // uid: the ID of its running sandbox container
	for _, ct := range containers {
		if ct.Running && ct.Labels[afev1.LabelRole] == afev1.RoleSandbox {
			ids[ct.Labels[afev1.LabelSandboxUID]] = ct.ID
		}
	}
	var out []*afev1.Sandbox
	for i := range sandboxes {
		sbx := &sandboxes[i]
		if !sbx.DeletionTimestamp.IsZero() {
			continue
		}
		id, running := ids[string(sbx.UID)]
		if identity.StatusNamesForeign(sbx) || running && sbx.Status.ContainerID != "" && sbx.Status.ContainerID != id {
			out = append(out, sbx)
		}
	}
	return out
}
