package sandbox

import (
	"context"
	"errors"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/controllers/hostids"
	"afe.dev/sandbox/controllers/writes"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/sandboxspec"
)

// idsExhaustedRetry is how often a sandbox waiting for a free id looks
// again.
const idsExhaustedRetry = 30 * time.Second

// hostIDs are the ids being given, shared with the pool reconciler when the
// manager set them (hostids.Allocator says how ids are allocated).
func (r *Reconciler) hostIDs() *hostids.Allocator {
	if r.IDs != nil {
		return r.IDs
	}
	return &r.ownIDs
}

// allocateUser sets s.resolved.User for a sandbox without spec.user: the
// id its container carries, else the one a container of its ticket
// carries, else a free one. The reservation must be released when the
// reconcile is done with it; a nil one comes with what to return.
func (r *Reconciler) allocateUser(ctx context.Context, s *sandboxScope) (*hostids.Reservation, ctrl.Result, error) {
	vopts, err := r.Config.Validation()
	if err != nil {
		return nil, ctrl.Result{}, err
	}
	holder := hostids.HolderOf(s.id.Labels(afev1.RoleSandbox))
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
	id, err := r.hostIDs().Reserve(ctx, r.Engine, holder, own, vopts)
	if ie, ok := sandboxspec.AsInvalid(err); ok {
		writes.SetCondition(s.sbx, afev1.ContainerReadyCondition, false, ie.Reason, ie.Message)
		return nil, ctrl.Result{RequeueAfter: idsExhaustedRetry}, nil
	}
	if err != nil {
		return nil, ctrl.Result{}, err
	}
	s.resolved.User = id.User
	return id, ctrl.Result{}, nil
}

// AllocatedUser is the host id the reconciler gives the Sandbox, reserved
// and released at once; ok is false when it gives none yet. The
// integration suite asks a reconciler that never saw the Sandbox, to prove
// the id is derived from the engine alone.
func (r *Reconciler) AllocatedUser(ctx context.Context, sbx *afev1.Sandbox) (user string, ok bool, err error) {
	s := &sandboxScope{sbx: sbx, id: sandboxspec.IdentityOf(sbx, r.Config.Instance)}
	id, _, err := r.allocateUser(ctx, s)
	if id == nil {
		return "", false, err
	}
	id.Release()
	return s.resolved.User, true, err
}
