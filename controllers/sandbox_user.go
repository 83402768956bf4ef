package controllers

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/sandboxspec"
)

// removeRefusedContainer removes the sandbox's container when it runs as a
// user the controller's policy refuses, as after a change of --deny-gids,
// --allowed-uids or --allowed-gids, or under a runtime no longer on
// --runtimes: what is refused is refused also for a container made
// earlier. A container of an earlier spec whose user is
// allowed is kept, like for any spec that cannot be honoured.
func (r *SandboxReconciler) removeRefusedContainer(ctx context.Context, s *sandboxScope) error {
	name := s.containerName()
	c, err := ownedContainer(ctx, r.Engine, s.id, name, "")
	if c == nil {
		return ignoreNotFound(err)
	}
	vopts, err := r.Options.validation()
	if err != nil {
		return err
	}
	if !sandboxspec.RuntimeAllowed(c.Runtime, vopts) {
		logf.FromContext(ctx).Info("Removing a container whose runtime is refused", "container", name, "runtime", c.Runtime)
		if err := r.Engine.RemoveContainer(ctx, c.ID); err != nil {
			return err
		}
		s.sbx.Status.ContainerID = ""
		r.Recorder.Eventf(s.sbx, nil, corev1.EventTypeWarning, afev1.RuntimeNotAllowedReason, "Remove",
			"Removed container %s: its runtime %s is not on the controller's --runtimes; the workspace is kept", name, c.Runtime)
		return nil
	}
	if _, _, err := sandboxspec.ValidateUser(c.User, vopts); err == nil {
		return nil
	}
	// An id allocated to it (afe.uid) is its own, not a refused user.
	if _, err := sandboxspec.ValidateAllocated(c.User, vopts); err == nil && c.Labels[afev1.LabelUser] == c.User {
		return nil
	}
	logf.FromContext(ctx).Info("Removing a container whose user is refused", "container", name, "user", c.User)
	if err := r.Engine.RemoveContainer(ctx, c.ID); err != nil {
		return err
	}
	s.sbx.Status.ContainerID = ""
	r.Recorder.Eventf(s.sbx, nil, corev1.EventTypeWarning, afev1.UserNotAllowedReason, "Remove",
		"Removed container %s: its user %s is refused by the controller's policy; the workspace is kept", name, c.User)
	return nil
}
