// Package hostids gives the host ids of sandboxes without spec.user, and
// of warm pool members: one uid:gid per ticket from --sandbox-id-range,
// recorded on the engine (the afe.uid label of the containers), shared by
// the Sandbox and SandboxPool reconcilers.
package hostids

import (
	"context"
	"errors"
	"fmt"
	"sync"

	logf "sigs.k8s.io/controller-runtime/pkg/log"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/sandboxspec"
)

// Host ids of sandboxes without spec.user. Each ticket's sandboxes get a
// uid:gid of their own from --sandbox-id-range (one id, uid = gid), so that
// what the kernel counts per user (inotify instances and watches, processes
// under RLIMIT_NPROC, pipe buffers, ...) is not shared with other tenants or
// with the host's users. The scopes of a Folder ticket, which share one
// folder, share the ticket's id; a Volume ticket has one sandbox. A warm
// pool's member gets an id of its own when it is made, which the Sandbox
// that claims it keeps.
//
// The record of who holds an id is the afe.uid label of the sandbox and
// member containers on the engine, of every controller instance: nothing is
// kept in memory but the ids being given right now, from the moment one is
// chosen until its container carries it. A sandbox keeps the id its
// container carries through a drift; when its containers are all gone (a
// loss, a restart in the middle of a recreation) the allocation starts again
// where the ticket's identity decides, so it finds the same id unless
// another sandbox took it meanwhile. An id is free again once no container
// carries it: when the sandbox, or the member, is gone. Two instances that
// choose the same id at once on one engine are told apart after the
// creation: the container started later gives it up (Reservation.Verify).

// Allocator holds the host ids this manager is giving to containers,
// shared by the Sandbox and the SandboxPool reconcilers.
type Allocator struct {
	mu      sync.Mutex
	pending map[string]*pendingID // by holder
}

type pendingID struct{ id, refs int }

// Engine is what the allocation asks of the engine.
type Engine interface {
	ListContainers(ctx context.Context, labels map[string]string) ([]docker.Container, error)
	InspectContainer(ctx context.Context, nameOrID string) (*docker.Container, error)
	RemoveContainer(ctx context.Context, id string) error
}

// HolderOf is who an id belongs to, from labels of its objects: a ticket
// (or a sandbox without one) of a namespace and a controller instance, or
// one member of a pool (its claimant keeps the member's id: the member's
// labels never change).
func HolderOf(labels map[string]string) string {
	if labels[afev1.LabelRole] == afev1.RoleMember {
		return labels[afev1.LabelController] + "/" + labels[afev1.LabelNamespace] + "/member:" + labels[afev1.LabelMemberName]
	}
	return labels[afev1.LabelController] + "/" + labels[afev1.LabelNamespace] + "/" + labels[afev1.LabelTicket]
}

// holdingRoles are the roles of the containers whose afe.uid holds an id.
var holdingRoles = []string{afev1.RoleSandbox, afev1.RoleMember}

// Reservation is an id being given to a holder's container; Release it
// once the container carries it, or was not made.
type Reservation struct {
	ids    *Allocator
	holder string
	// User is the id as uid:gid.
	User string
	// fresh is true when no container of the holder carried the id: it is
	// verified once the container runs.
	fresh bool
}

// Reserve gives holder an id: own (the id its container carries, valid),
// else the one a container of the holder carries or this manager is giving
// it, else a free one. An InvalidError says the range is exhausted.
func (h *Allocator) Reserve(ctx context.Context, engine Engine, holder, own string, vopts sandboxspec.Options) (*Reservation, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.pending == nil {
		h.pending = map[string]*pendingID{}
	}
	fresh := false
	if own == "" {
		id, found, err := h.choose(ctx, engine, holder, vopts)
		if err != nil {
			return nil, err
		}
		own, fresh = sandboxspec.AllocatedUser(id), !found
	}
	id, err := sandboxspec.ValidateAllocated(own, vopts)
	if err != nil {
		return nil, err
	}
	res := h.pending[holder]
	if res == nil || res.id != id {
		res = &pendingID{id: id, refs: res.refsOr0()}
		h.pending[holder] = res
	}
	res.refs++
	return &Reservation{ids: h, holder: holder, User: own, fresh: fresh}, nil
}

func (x *pendingID) refsOr0() int {
	if x == nil {
		return 0
	}
	return x.refs
}

// holders lists the containers of the engine that hold an id, whatever
// their instance.
func holders(ctx context.Context, engine Engine, user string) ([]docker.Container, error) {
	var all []docker.Container
	for _, role := range holdingRoles {
		sel := map[string]string{afev1.LabelRole: role}
		if user != "" {
			sel[afev1.LabelUser] = user
		}
		cs, err := engine.ListContainers(ctx, sel)
		if err != nil {
			return nil, err
		}
		all = append(all, cs...)
	}
	return all, nil
}

// choose is the id of holder, under h.mu: the one a container of the holder
// carries or this manager is giving it (found), else a free one of the
// range: none that a container of the engine carries for another holder,
// whatever its instance, or that this manager is giving another.
func (h *Allocator) choose(ctx context.Context, engine Engine, holder string, vopts sandboxspec.Options) (id int, found bool, err error) {
	containers, err := holders(ctx, engine, "")
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
		if HolderOf(c.Labels) != holder {
			taken[uid], taken[gid] = true, true
		} else if _, err := sandboxspec.ValidateAllocated(label, vopts); err == nil {
			id, found = uid, true
		}
	}
	for other, res := range h.pending {
		if other != holder {
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

// Release ends the reservation: the container carries the id from now on,
// or was not made.
func (x *Reservation) Release() {
	x.ids.mu.Lock()
	defer x.ids.mu.Unlock()
	if res := x.ids.pending[x.holder]; res != nil {
		if res.refs--; res.refs <= 0 {
			delete(x.ids.pending, x.holder)
		}
	}
}

// ErrTaken says the id given to a container was taken at the same moment
// by a container of another controller instance on the engine.
var ErrTaken = errors.New("the sandbox's id was taken meanwhile by another sandbox")

// Verify checks, once the container of a freshly allocated id runs, that
// no container of another holder carries the id and started before it
// (another controller instance on the engine chose it at the same moment);
// if one does, the container is removed and an ErrTaken returned, to
// choose again. The container started later always gives in, so exactly
// one of the two keeps the id.
func (x *Reservation) Verify(ctx context.Context, engine Engine, created *docker.Container) error {
	if !x.fresh {
		return nil
	}
	others, err := holders(ctx, engine, x.User)
	if err != nil {
		return err
	}
	for _, o := range others {
		if o.ID == created.ID || HolderOf(o.Labels) == x.holder {
			continue
		}
		other, err := engine.InspectContainer(ctx, o.ID)
		if errors.Is(err, docker.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if other.StartedAt.After(created.StartedAt) ||
			(other.StartedAt.Equal(created.StartedAt) && HolderOf(other.Labels) > x.holder) {
			continue // it gives in
		}
		logf.FromContext(ctx).Info("Another container took the id at the same moment; choosing another",
			"container", created.Name, "user", x.User, "other", other.Name)
		if err := engine.RemoveContainer(ctx, created.ID); err != nil {
			return err
		}
		return fmt.Errorf("container %s, user %s: %w", created.Name, x.User, ErrTaken)
	}
	return nil
}
