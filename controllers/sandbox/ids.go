package sandbox

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/controllers/shared"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/sandboxspec"
)

// Host ids of sandboxes without spec.user. Each ticket's sandboxes get a
// uid:gid of their own from --sandbox-id-range (one id, uid = gid), so that
// what the kernel counts per user (inotify instances and watches, processes
// under RLIMIT_NPROC, pipe buffers, ...) is not shared with other tenants or
// with the host's users. The scopes of a Folder ticket, which share one
// folder, share the ticket's id; a Volume ticket has one sandbox.
//
// The record of who holds an id is the afe.uid label of the sandbox
// containers on the engine, of every controller instance: nothing is kept
// in memory but the ids being given right now, from the moment one is
// chosen until its container carries it. A sandbox keeps the id its
// container carries through a drift; when its containers are all gone (a
// loss, a restart in the middle of a recreation) the allocation starts again
// where the ticket's identity decides, so it finds the same id unless
// another sandbox took it meanwhile. An id is free again once no container
// carries it: when the sandbox is gone. Two instances that choose the same
// id at once on one engine are told apart after the creation: the container
// started later gives it up (see claimedUser.verify).

// idsExhaustedRetry is how often a sandbox waiting for a free id looks
// again.
const idsExhaustedRetry = 30 * time.Second

// idReservations are the ids this manager is giving to containers.
type idReservations struct {
	mu      sync.Mutex
	pending map[string]*idReservation // by holder
}

type idReservation struct{ id, refs int }

// holderOf is who an id belongs to: a ticket (or a sandbox without one) of
// a namespace and a controller instance, from labels of its objects.
func holderOf(labels map[string]string) string {
	return labels[afev1.LabelController] + "/" + labels[afev1.LabelNamespace] + "/" + labels[afev1.LabelTicket]
}

// claimedUser is the id a reconcile gives the sandbox's container.
type claimedUser struct {
	r      *Reconciler
	holder string
	user   string
	// fresh is true when no container of the holder carried the id: it is
	// verified once the container runs.
	fresh bool
}

// allocateUser sets s.resolved.User for a sandbox without spec.user: the
// id its container carries, else the one a container of its ticket
// carries, else a free one. The claim must be released when the reconcile
// is done with it; a nil claim comes with what to return.
func (r *Reconciler) allocateUser(ctx context.Context, s *sandboxScope) (*claimedUser, ctrl.Result, error) {
	vopts, err := r.Config.Validation()
	if err != nil {
		return nil, ctrl.Result{}, err
	}
	holder := holderOf(s.id.Labels(afev1.RoleSandbox))
	own := ""
	have, err := r.Engine.InspectContainer(ctx, s.containerName())
	if err != nil && !errors.Is(err, docker.ErrNotFound) {
		return nil, ctrl.Result{}, err
	}
	if have != nil && s.id.OwnsAs(have.Labels, afev1.RoleSandbox) {
		if _, err := sandboxspec.ValidateAllocated(have.Labels[afev1.LabelUser], vopts); err == nil && have.User == have.Labels[afev1.LabelUser] {
			own = have.User
		}
	}

	r.ids.mu.Lock()
	defer r.ids.mu.Unlock()
	if r.ids.pending == nil {
		r.ids.pending = map[string]*idReservation{}
	}
	fresh := false
	if own == "" {
		id, found, err := r.chooseID(ctx, holder, vopts)
		if ie, ok := sandboxspec.AsInvalid(err); ok {
			shared.SetCondition(s.sbx, afev1.ContainerReadyCondition, false, ie.Reason, ie.Message)
			return nil, ctrl.Result{RequeueAfter: idsExhaustedRetry}, nil
		}
		if err != nil {
			return nil, ctrl.Result{}, err
		}
		own, fresh = sandboxspec.AllocatedUser(id), !found
	}
	id, _ := sandboxspec.ValidateAllocated(own, vopts)
	res := r.ids.pending[holder]
	if res == nil || res.id != id {
		res = &idReservation{id: id, refs: res.refsOr0()}
		r.ids.pending[holder] = res
	}
	res.refs++
	s.resolved.User = own
	return &claimedUser{r: r, holder: holder, user: own, fresh: fresh}, ctrl.Result{}, nil
}

func (x *idReservation) refsOr0() int {
	if x == nil {
		return 0
	}
	return x.refs
}

// chooseID is the id of holder, under r.ids.mu: the one a sandbox
// container of the holder carries or this manager is giving it (found),
// else a free one of the range: none that a container of the engine
// carries for another holder, whatever its instance, or that this manager
// is giving another.
func (r *Reconciler) chooseID(ctx context.Context, holder string, vopts sandboxspec.Options) (id int, found bool, err error) {
	containers, err := r.Engine.ListContainers(ctx, map[string]string{afev1.LabelRole: afev1.RoleSandbox})
	if err != nil {
		return 0, false, err
	}
	taken := map[int]bool{}
	for _, c := range containers {
		label := c.Labels[afev1.LabelUser]
		if label == "" {
			continue
		}
		uid, gid, err := sandboxspec.ParseUser(label)
		if err != nil {
			continue
		}
		if holderOf(c.Labels) != holder {
			taken[uid], taken[gid] = true, true
		} else if _, err := sandboxspec.ValidateAllocated(label, vopts); err == nil {
			id, found = uid, true
		}
	}
	for h, res := range r.ids.pending {
		if h != holder {
			taken[res.id] = true
		} else if !found && res.refs > 0 {
			id, found = res.id, true
		}
	}
	if found && !taken[id] {
		return id, true, nil
	}
	id, err = sandboxspec.AllocateID(holder, taken, vopts)
	return id, false, err
}

// release ends the claim: the container carries the id from now on, or
// was not made.
func (c *claimedUser) release() {
	c.r.ids.mu.Lock()
	defer c.r.ids.mu.Unlock()
	if res := c.r.ids.pending[c.holder]; res != nil {
		if res.refs--; res.refs <= 0 {
			delete(c.r.ids.pending, c.holder)
		}
	}
}

// errIDTaken: the id given to a container was taken at the same moment by
// a sandbox of another controller instance on the engine.
var errIDTaken = errors.New("the sandbox's id was taken meanwhile by another sandbox")

// verify checks, once the container of a freshly allocated id runs, that
// no container of another holder carries the id and started before it
// (another controller instance on the engine chose it at the same moment);
// if one does, the container is removed and the reconcile fails, to
// choose again. The container started later always gives in, so exactly
// one of the two keeps the id.
func (c *claimedUser) verify(ctx context.Context, created *docker.Container) error {
	if !c.fresh {
		return nil
	}
	others, err := c.r.Engine.ListContainers(ctx, map[string]string{afev1.LabelRole: afev1.RoleSandbox, afev1.LabelUser: c.user})
	if err != nil {
		return err
	}
	for _, o := range others {
		if o.ID == created.ID || holderOf(o.Labels) == c.holder {
			continue
		}
		other, err := c.r.Engine.InspectContainer(ctx, o.ID)
		if errors.Is(err, docker.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if other.StartedAt.After(created.StartedAt) ||
			(other.StartedAt.Equal(created.StartedAt) && holderOf(other.Labels) > c.holder) {
			continue // it gives in
		}
		logf.FromContext(ctx).Info("Another sandbox took the id at the same moment; choosing another",
			"container", created.Name, "user", c.user, "other", other.Name)
		if err := c.r.Engine.RemoveContainer(ctx, created.ID); err != nil {
			return err
		}
		return fmt.Errorf("container %s, user %s: %w", created.Name, c.user, errIDTaken)
	}
	return nil
}

// AllocatedUser is the host id the reconciler gives the Sandbox, claimed
// and released at once; ok is false when it gives none yet. The integration
// suite asks a reconciler that never saw the Sandbox, to prove the id is
// derived from the engine alone.
func (r *Reconciler) AllocatedUser(ctx context.Context, sbx *afev1.Sandbox) (user string, ok bool, err error) {
	s := &sandboxScope{sbx: sbx, id: sandboxspec.IdentityOf(sbx, r.Config.Instance)}
	claim, _, err := r.allocateUser(ctx, s)
	if claim == nil {
		return "", false, err
	}
	claim.release()
	return s.resolved.User, true, err
}
