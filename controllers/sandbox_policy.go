package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/sandboxspec"
)

// deniedSecretTypes are the Secrets whose keys never enter a sandbox: they
// are credentials of the Kubernetes API, which would let the workload act
// as a service account (or join a node) beyond the namespace it was given.
var deniedSecretTypes = map[corev1.SecretType]string{
	corev1.SecretTypeServiceAccountToken: "a service-account token",
	corev1.SecretTypeBootstrapToken:      "a bootstrap token",
}

// checkSecret refuses a Secret an env var may not read.
func checkSecret(envName string, secret *corev1.Secret) error {
	what, denied := deniedSecretTypes[secret.Type]
	if !denied {
		return nil
	}
	return &sandboxspec.InvalidError{Reason: afev1.SecretNotAllowedReason, Message: fmt.Sprintf(
		"Env %s: Secret %s is %s (type %s); Kubernetes API credentials never enter a sandbox. Put the value the sandbox needs in an Opaque Secret",
		envName, secret.Name, what, secret.Type)}
}

// removeRefusedContainer removes the sandbox's container when it runs as a
// user the controller's policy refuses, as after a change of --deny-gids,
// --allowed-uids or --allowed-gids: a refused user is refused also for a
// container made earlier. A container of an earlier spec whose user is
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
	if _, _, err := sandboxspec.ValidateUser(c.User, vopts); err == nil {
		return nil
	}
	logf.FromContext(ctx).Info("Removing a container whose user is refused", "container", name, "user", c.User)
	if err := r.Engine.RemoveContainer(ctx, c.ID); err != nil {
		return err
	}
	s.sbx.Status.ContainerID = ""
	r.Recorder.Eventf(s.sbx, nil, "Warning", afev1.UserNotAllowedReason, "Remove",
		"Removed container %s: its user %s is refused by the controller's policy; the workspace is kept", name, c.User)
	return nil
}
