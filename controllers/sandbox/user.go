package sandbox

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/controllers/identity"
	"afe.dev/sandbox/internal/sandboxspec"
)

// removeRefusedContainer removes the sandbox's container when it runs as a
// user the controller's policy refuses, as after a change of --deny-gids,
// --allowed-uids or --allowed-gids, or under a runtime no longer on
// --runtimes: what is refused is refused also for a container made
// earlier. A container of an earlier spec whose user is
// allowed is kept, like for any spec that cannot be honoured.
func (r *Reconciler) removeRefusedContainer(ctx context.Context, s *sandboxScope) error {
	name := s.containerName()
	c, err := identity.OwnedContainer(ctx, r.Engine, s.id, name, "")
	if c == nil {
		return identity.IgnoreEngineNotFound(err)
	}
	vopts, err := r.Config.Validation()
	if err != nil {
		return err
	}
	if !sandboxspec.RuntimeAllowed(c.Runtime, vopts) {
		return r.removeRefused(ctx, s, c.ID, afev1.RuntimeNotAllowedReason,
			fmt.Sprintf("its runtime %s is not on the controller's --runtimes", c.Runtime))
	}
	if _, _, err := sandboxspec.ValidateUser(c.User, vopts); err == nil {
		return nil
	}
	// An id allocated to it (afe.uid) is its own, not a refused user.
	if _, err := sandboxspec.ValidateAllocated(c.User, vopts); err == nil && c.Labels[afev1.LabelUser] == c.User {
		return nil
	}
	return r.removeRefused(ctx, s, c.ID, afev1.UserNotAllowedReason,
		fmt.Sprintf("its user %s is refused by the controller's policy", c.User))
}

// removeRefused removes the sandbox's container, which the policy refuses
// for the reason why says, keeping the workspace, and says so in an Event.
func (r *Reconciler) removeRefused(ctx context.Context, s *sandboxScope, id, reason, why string) error {
	name := s.containerName()
	logf.FromContext(ctx).Info("Removing a container the controller's policy refuses", "container", name, "reason", reason, "why", why)
	if err := r.Engine.RemoveContainer(ctx, id); err != nil {
		return err
	}
	s.sbx.Status.ContainerID = ""
	r.Recorder.Eventf(s.sbx, nil, corev1.EventTypeWarning, reason, "Remove",
		"Removed container %s: %s; the workspace is kept", name, why)
	return nil
}
