package sandbox

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/controllers/identity"
	"afe.dev/sandbox/controllers/writes"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/crashpoint"
	"afe.dev/sandbox/internal/metrics"
	"afe.dev/sandbox/internal/naming"
	"afe.dev/sandbox/internal/pool"
	"afe.dev/sandbox/internal/sandboxspec"
)

// Warm pools: a Sandbox that a pool's member can serve takes it instead of
// having a container made. The claim's steps, and why each leaves the
// engine in a state the next reconcile reads back after a crash, are in
// internal/pool (claim.go); this carries them out.

// claimedMember is the pool member a sandbox runs on, bound by its record.
type claimedMember struct {
	container *docker.Container
	record    map[string]string
}

// maxClaimSteps bounds the steps of one reconcile's claim: each is read
// back before the next, and a claim that has not converged by then goes on
// at the next reconcile.
const maxClaimSteps = 8

// reconcileClaim binds the sandbox to a member of a pool when it has one
// (s.claimed) or takes one when it may, and otherwise leaves the sandbox
// to the cold path; done is true when the reconcile ends here.
func (r *Reconciler) reconcileClaim(ctx context.Context, s *sandboxScope) (done bool, res ctrl.Result, err error) {
	spec := &s.sbx.Spec.SandboxTemplateSpec
	if spec.Workspace.Type == afev1.WorkspaceFolder || spec.Workspace.FromSnapshot != "" {
		return r.unservable(ctx, s)
	}
	var chosen *pool.Choice
	var v pool.ClaimView
	read := true
	for range maxClaimSteps {
		if read {
			var err error
			if v, err = r.claimView(ctx, s, chosen); err != nil {
				return true, ctrl.Result{}, err
			}
		}
		read = true
		if r.resumeClaimed(s, v) {
			if err := r.Engine.StartContainer(ctx, v.Named.ID); err != nil {
				return true, ctrl.Result{}, err
			}
			continue
		}
		if r.keptOverDisk(s, v) {
			s.bind(v)
			return false, ctrl.Result{}, nil
		}
		step := pool.NextClaimStep(v)
		if step.Reason != "" {
			logf.FromContext(ctx).Info("Claim of a pool member", "step", step.Action, "why", step.Reason)
		}
		switch step.Action {
		case pool.ClaimNone:
			return false, ctrl.Result{}, nil
		case pool.ClaimBound:
			s.bind(v)
			return false, ctrl.Result{}, nil
		case pool.ClaimConflict:
			res, err := s.notAdopted(afev1.ContainerReadyCondition, "Claim record", naming.Claim(s.id.Key))
			return true, res, err
		case pool.ClaimChoose:
			c, cold, err := r.choose(ctx, s)
			if err != nil || cold {
				return err != nil, ctrl.Result{}, err
			}
			chosen, v.Chosen = c, c
			r.claimInFlight(s)
			read = false // choosing changed nothing on the engine
			continue
		}
		keep, err := r.takeClaimStep(ctx, s, step, v)
		if err != nil {
			return true, ctrl.Result{}, err
		}
		if !keep {
			chosen = nil
		}
	}
	return true, ctrl.Result{RequeueAfter: time.Second}, nil
}

// takeClaimStep carries out a step of the claim that changes the engine;
// keep is false when the step ends the member's choice (its record dropped
// or released, or the sandbox's own member lost).
func (r *Reconciler) takeClaimStep(ctx context.Context, s *sandboxScope, step pool.ClaimStep, v pool.ClaimView) (keep bool, err error) {
	if step.Action == pool.ClaimRelease && pool.OwnsRecord(s.id, v.Record) || claimedGone(s, v, step) {
		// Its own member exited or went: a loss, recorded first.
		return false, r.releaseLost(ctx, s)
	}
	if err := r.claimStep(ctx, s, step.Action, v); err != nil {
		return true, err
	}
	return step.Action != pool.ClaimDropRecord && step.Action != pool.ClaimRelease, nil
}

// bind makes the member v names the sandbox's claimed member.
func (s *sandboxScope) bind(v pool.ClaimView) {
	s.claimed = &claimedMember{container: v.Named, record: v.Record}
	s.sbx.Status.Pool = v.Record[afev1.LabelPool]
}

// claimInFlight counts the reconcile's claim in flight, until its status
// is written (endClaim): the pools' refill waits for it.
func (r *Reconciler) claimInFlight(s *sandboxScope) {
	if s.claimEnd == nil {
		s.claimEnd = r.Claims.Start()
	}
}

// claimedGone is true when the member the sandbox's own record names is
// gone from the engine after the sandbox ran on it: removed whole, not
// only exited (NextClaimStep drops the record of a member gone, as for a
// claim that never completed). That it ran on it is read from the status
// the claim wrote (its container's ID is the record's member): a forged
// status can only count a loss of the sandbox's own, and the member's
// objects go either way.
func claimedGone(s *sandboxScope, v pool.ClaimView, step pool.ClaimStep) bool {
	return step.Action == pool.ClaimDropRecord && v.Member == nil && pool.OwnsRecord(s.id, v.Record) &&
		s.sbx.Status.ContainerID != "" && s.sbx.Status.ContainerID == v.Record[afev1.LabelMember]
}

// unservable leaves to the cold path a sandbox no member can serve (a
// Folder workspace, a workspace restored from a snapshot); one that named
// a pool is a miss, counted once: before its container exists (the engine
// says so, not the status).
func (r *Reconciler) unservable(ctx context.Context, s *sandboxScope) (done bool, res ctrl.Result, err error) {
	spec := &s.sbx.Spec.SandboxTemplateSpec
	if spec.PoolRef == nil {
		return false, ctrl.Result{}, nil // no pool concerns it
	}
	_, err = r.Engine.InspectContainer(ctx, s.containerName())
	if errors.Is(err, docker.ErrNotFound) {
		r.missed(s, pool.Choose(pool.Request{ID: s.id, Spec: spec}, nil, nil))
		err = nil
	}
	return err != nil, ctrl.Result{}, err
}

// resumeClaimed is true when the sandbox's claimed member is stopped because
// the sandbox was suspended, or went over its resources.disk and no longer
// is: it is started again, never released.
func (r *Reconciler) resumeClaimed(s *sandboxScope, v pool.ClaimView) bool {
	if stoppedOverDisk(s, v) {
		return !r.heldOverDisk(s.sbx)
	}
	return s.wasSuspended && v.Named != nil && !v.Named.Running && pool.Binds(s.id, v.Record, v.Named)
}

// claimStep carries out one step of a claim that changes the engine.
func (r *Reconciler) claimStep(ctx context.Context, s *sandboxScope, action pool.ClaimAction, v pool.ClaimView) error {
	switch action {
	case pool.ClaimWriteRecord:
		unlock := r.Turns.Lock(s.id.Namespace, v.Chosen.Pool)
		defer unlock()
		_, err := r.Engine.EnsureVolume(ctx, pool.Record(s.id, *v.Chosen))
		if err == nil {
			crashpoint.Here(CrashClaimRecorded)
		}
		return err
	case pool.ClaimRename:
		unlock := r.Turns.Lock(s.id.Namespace, v.Record[afev1.LabelPool])
		defer unlock()
		err := r.Engine.RenameContainer(ctx, v.Record[afev1.LabelMemberName], naming.Container(s.id.Key))
		if errors.Is(err, docker.ErrNotFound) || errors.Is(err, docker.ErrConflict) {
			return nil // another claimant won it: the next step drops the record
		}
		if err == nil {
			crashpoint.Here(CrashClaimRenamed)
			r.claimedWarm(ctx, s, v.Record[afev1.LabelPool])
		}
		return err
	case pool.ClaimDropRecord:
		return identity.IgnoreEngineNotFound(r.Engine.RemoveVolume(ctx, naming.Claim(s.id.Key)))
	case pool.ClaimRelease:
		return r.releaseClaim(ctx, s, v)
	case pool.ClaimRemoveOrphan:
		return r.removeMemberObjects(ctx, s, v.Named.ID, v.Named.Labels[afev1.LabelMemberName], v.Named.Labels)
	}
	return fmt.Errorf("unknown claim step %s", action)
}

// The points of a claim where a crash leaves the engine in a state of its
// own (internal/crashpoint): the record written and its member still under
// its pool's name; the member renamed and the Sandbox's status not yet
// written; the status written and a Sandbox made without its finalizer
// not yet given it (ensureFinalizer).
const (
	CrashClaimRecorded      = "claim-recorded"
	CrashClaimRenamed       = "claim-renamed"
	CrashClaimStatusWritten = "claim-status-written"
)

// claimedWarm counts a warm claim, and has its pool refilled once the
// reconcile's status is written (endClaim).
func (r *Reconciler) claimedWarm(ctx context.Context, s *sandboxScope, poolName string) {
	metrics.PoolClaims.WithLabelValues(s.id.Namespace, poolName, string(pool.Warm)).Inc()
	if !s.claimStarted.IsZero() {
		metrics.PoolClaimSeconds.Observe(time.Since(s.claimStarted).Seconds())
	}
	r.PoolCounts.Add(s.id.Namespace, poolName, 1, 0)
	s.refill = poolName
	logf.FromContext(ctx).Info("Claimed a pool member", "pool", poolName, "container", naming.Container(s.id.Key))
}

// claimView reads what the engine shows of the sandbox's claim: its
// record and the container bearing the sandbox's name, at once, then the
// member the record names (by ID), which is that container once renamed.
func (r *Reconciler) claimView(ctx context.Context, s *sandboxScope, chosen *pool.Choice) (pool.ClaimView, error) {
	v := pool.ClaimView{Sandbox: s.id, Chosen: chosen}
	var rec *docker.Volume
	var recErr, namedErr error
	var wg sync.WaitGroup
	wg.Go(func() { rec, recErr = r.Engine.InspectVolume(ctx, naming.Claim(s.id.Key)) })
	wg.Go(func() { v.Named, namedErr = r.Engine.InspectContainer(ctx, s.containerName()) })
	wg.Wait()
	switch {
	case recErr == nil:
		v.Record = rec.Labels
		if v.Record == nil {
			v.Record = map[string]string{}
		}
	case !errors.Is(recErr, docker.ErrNotFound):
		return v, recErr
	}
	if namedErr != nil {
		v.Named = nil
		if !errors.Is(namedErr, docker.ErrNotFound) {
			return v, namedErr
		}
	}
	id := v.Record[afev1.LabelMember]
	switch {
	case id == "":
	case v.Named != nil && v.Named.ID == id:
		v.Member = v.Named
	default:
		var err error
		if v.Member, err = r.Engine.InspectContainer(ctx, id); err != nil {
			v.Member = nil
			if !errors.Is(err, docker.ErrNotFound) {
				return v, err
			}
		}
	}
	return v, nil
}

// choose picks the member that serves the sandbox; cold is true when none
// does (counted, and said in an Event when the sandbox named a pool). A
// sandbox whose own workspace exists (it ran cold before) stays cold.
func (r *Reconciler) choose(ctx context.Context, s *sandboxScope) (c *pool.Choice, cold bool, err error) {
	s.claimStarted = time.Now()
	if r.arriving(s) {
		return nil, true, nil // its workspace follows it (move.go)
	}
	if uid, err := r.afterNodeLost(ctx, s); err != nil || uid != "" {
		return nil, true, err // it may start from a snapshot (lostrestore.go)
	}
	vopts, err := r.Config.Validation()
	if err != nil {
		return nil, true, err
	}
	pools, err := r.poolsOf(ctx, s.sbx.Namespace, vopts, s.resolved.DiskEnforcement)
	if err != nil {
		return nil, true, err
	}
	req := pool.Request{ID: s.id, Spec: &s.sbx.Spec.SandboxTemplateSpec,
		Shape: pool.ShapeOf(&s.sbx.Spec.SandboxTemplateSpec, vopts, s.resolved.Env, s.resolved.DiskEnforcement)}
	if len(pools) == 0 && req.Spec.PoolRef == nil {
		return nil, true, nil // no pool concerns it: no engine request
	}
	// Its own workspace, and the members, read at once.
	var members []pool.Member
	var ownErr, membersErr error
	var wg sync.WaitGroup
	wg.Go(func() { _, ownErr = identity.WorkspaceVolume(ctx, r.Engine, s.id) })
	wg.Go(func() { members, membersErr = r.membersOf(ctx, s, &req) })
	wg.Wait()
	if !errors.Is(ownErr, docker.ErrNotFound) {
		return nil, true, ownErr // it ran cold before: it stays so
	}
	if membersErr != nil {
		return nil, true, membersErr
	}
	choice := pool.Choose(req, pools, members)
	if choice.Result != pool.Warm {
		r.missed(s, choice)
		return nil, true, nil
	}
	return &choice, false, nil
}

// poolsOf are the SandboxPools of the namespace, with their shapes under
// disk, the enforcement of the sandbox's disk limit (the engine's: a pool
// of another limit differs by it anyway).
func (r *Reconciler) poolsOf(ctx context.Context, namespace string, vopts sandboxspec.Options, disk afev1.DiskEnforcement) ([]pool.Pool, error) {
	list := &afev1.SandboxPoolList{}
	if err := r.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	out := make([]pool.Pool, 0, len(list.Items))
	for i := range list.Items {
		p := &list.Items[i]
		var env []string
		if len(p.Spec.Template.Command) > 0 && len(p.Spec.Template.Env) > 0 {
			sbx := &afev1.Sandbox{Spec: afev1.SandboxSpec{SandboxTemplateSpec: p.Spec.Template}}
			sbx.Namespace = namespace
			var err error
			if env, err = r.Config.EnvResolver(r.APIReader).Resolve(ctx, sbx); err != nil {
				continue // no member of it is made either
			}
		}
		out = append(out, pool.Pool{Name: p.Name, UID: string(p.UID), Created: p.CreationTimestamp.Time,
			Deleting: !p.DeletionTimestamp.IsZero(), Shape: pool.ShapeOf(&p.Spec.Template, vopts, env, disk)})
	}
	return out, nil
}

// membersOf lists the members of the namespace's pools on the engine, and
// notes in req the members other Sandboxes' records name.
func (r *Reconciler) membersOf(ctx context.Context, s *sandboxScope, req *pool.Request) ([]pool.Member, error) {
	sel := func(role string) map[string]string {
		return map[string]string{afev1.LabelController: s.id.Instance, afev1.LabelNamespace: s.id.Namespace, afev1.LabelRole: role}
	}
	var containers []docker.Container
	var records []docker.Volume
	var containersErr, recordsErr error
	var wg sync.WaitGroup
	wg.Go(func() { containers, containersErr = r.Engine.ListContainers(ctx, sel(afev1.RoleMember)) })
	wg.Go(func() { records, recordsErr = r.Engine.ListVolumes(ctx, sel(afev1.RoleClaim)) })
	wg.Wait()
	if err := errors.Join(containersErr, recordsErr); err != nil {
		return nil, err
	}
	req.Claiming = map[string]bool{}
	for _, v := range records {
		if v.Name != naming.Claim(s.id.Key) {
			req.Claiming[v.Labels[afev1.LabelMember]] = true
		}
	}
	members := make([]pool.Member, 0, len(containers))
	for _, c := range containers {
		members = append(members, pool.Member{Container: c, Created: c.Created})
	}
	return members, nil
}

// missed counts a sandbox created cold that a pool concerned, and says why
// in an Event when it named the pool. Its callers reach it only while the
// sandbox has no container and no workspace of its own yet (its first
// creation), as the engine shows it.
func (r *Reconciler) missed(s *sandboxScope, c pool.Choice) {
	if c.Result == pool.Cold || c.Result == pool.Warm {
		return
	}
	metrics.PoolClaims.WithLabelValues(s.sbx.Namespace, c.Pool, string(c.Result)).Inc()
	r.PoolCounts.Add(s.sbx.Namespace, c.Pool, 0, 1)
	if r.EnqueuePool != nil {
		r.EnqueuePool(s.sbx.Namespace, c.Pool)
	}
	if s.sbx.Spec.PoolRef != nil {
		reason := afev1.PoolEmptyReason
		if c.Result == pool.ColdMismatch {
			reason = afev1.PoolMismatchReason
		}
		r.Recorder.Eventf(s.sbx, nil, corev1.EventTypeNormal, reason, "Create", "Created cold: %s", c.Reason)
	}
}

// releaseClaim removes what a record binds that must go (a claimed member
// that exited, or what an earlier Sandbox of this name claimed): the
// member's container when it bears the sandbox's name, its workspace, then
// the record last, so that a crash in between finds them again from it.
//
// A member the record names that bears another name (its pool's, before
// the rename; or another Sandbox's) is not this claim's: only the record
// goes.
func (r *Reconciler) releaseClaim(ctx context.Context, s *sandboxScope, v pool.ClaimView) error {
	bound := v.Named != nil && v.Named.ID == v.Record[afev1.LabelMember] && v.Named.Labels[afev1.LabelRole] == afev1.RoleMember
	switch {
	case bound:
		if err := r.removeMemberObjects(ctx, s, v.Named.ID, v.Record[afev1.LabelMemberName], v.Record); err != nil {
			return err
		}
	case v.Member == nil:
		// Gone: its workspace is left to remove.
		if err := r.removeMemberObjects(ctx, s, "", v.Record[afev1.LabelMemberName], v.Record); err != nil {
			return err
		}
	}
	return identity.IgnoreEngineNotFound(r.Engine.RemoveVolume(ctx, naming.Claim(s.id.Key)))
}

// removeMemberObjects removes a member's container (by ID, when given),
// then its proxy and network (removeMemberEgress), then its workspace
// volume, each when its labels make it the object of the member that want
// (a claim record, or the member's own labels) names in that role.
func (r *Reconciler) removeMemberObjects(ctx context.Context, s *sandboxScope, id, member string, want map[string]string) error {
	if id != "" {
		if err := identity.IgnoreEngineNotFound(r.Engine.RemoveContainer(ctx, id)); err != nil {
			return err
		}
	}
	if member == "" {
		return nil
	}
	if err := r.removeMemberEgress(ctx, s, member, want); err != nil {
		return err
	}
	v, err := r.Engine.InspectVolume(ctx, naming.MemberVolume(member))
	if err != nil {
		return identity.IgnoreEngineNotFound(err)
	}
	if v.Labels[afev1.LabelMemberName] != member || !pool.MemberVolumeOf(s.id, want, v.Labels) {
		return nil
	}
	return identity.IgnoreEngineNotFound(r.Engine.RemoveVolume(ctx, v.Name))
}

// claimedContainer is the container phase of a sandbox served from a pool:
// the member it claimed runs (NextClaimStep said Bound). A spec changed
// since, in what shapes the container, is not applied to it: the member
// keeps the container it was made with, and the condition says how to
// apply it (recreate the Sandbox). A member over its resources.disk is
// stopped and kept (stopClaimedOverDisk).
func (r *Reconciler) claimedContainer(ctx context.Context, s *sandboxScope) (ctrl.Result, error) {
	sbx, c := s.sbx, s.claimed.container
	sbx.Status.ContainerName = c.Name
	sbx.Status.ContainerID = c.ID
	vopts, err := r.Config.Validation()
	if err != nil {
		return ctrl.Result{}, err
	}
	if why, over := r.Disk.OverDisk(sbx); over || !c.Running {
		return r.stopClaimedOverDisk(ctx, s, why)
	}
	shape := pool.ShapeOf(&sbx.Spec.SandboxTemplateSpec, vopts, s.resolved.Env, s.resolved.DiskEnforcement)
	if c.Labels[afev1.LabelSpecHash] != shape.Hash() {
		writes.SetCondition(sbx, afev1.ContainerReadyCondition, true, afev1.PoolDriftNotAppliedReason,
			fmt.Sprintf("Container %s, a member of pool %s, is running; the spec changed what shapes the container since it was claimed, which a member keeps: delete and create the Sandbox again to apply it",
				c.Name, sbx.Status.Pool))
	} else {
		writes.SetCondition(sbx, afev1.ContainerReadyCondition, true, afev1.ReadyReason,
			"Container "+c.Name+", a member of pool "+sbx.Status.Pool+", is running")
	}
	r.resumed(ctx, s)
	return ctrl.Result{}, nil
}

// releaseOwnClaim releases the claim of a Sandbox being deleted: the
// member it claimed and its workspace, then the record. Claimed members
// never return to a pool.
func (r *Reconciler) releaseOwnClaim(ctx context.Context, s *sandboxScope) error {
	v, err := r.claimView(ctx, s, nil)
	if err != nil || v.Record == nil || !pool.OwnsRecord(s.id, v.Record) {
		return err
	}
	return r.releaseClaim(ctx, s, v)
}

// releaseLost records the loss of a claimed member's workspace or
// container, commits it, and releases the claim: the next reconcile takes
// another member, or creates the sandbox cold, with a fresh workspace.
func (r *Reconciler) releaseLost(ctx context.Context, s *sandboxScope) error {
	v, err := r.claimView(ctx, s, nil)
	if err != nil {
		return err
	}
	if err := r.commitLoss(ctx, s, v.Named); err != nil {
		return err
	}
	return r.releaseClaim(ctx, s, v)
}
