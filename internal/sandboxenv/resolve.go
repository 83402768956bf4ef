// Package sandboxenv resolves a Sandbox's declared env (values, keys of
// Secrets of its namespace, variables of the controller's own environment
// that --env-passthrough lists) into KEY=VALUE. It is the one resolver of
// the Sandbox controller (its condition, and the container of a sandbox
// with its own command), the Run controller (each attempt's execs) and the
// access API (exec and shell): each resolves the env afresh when it needs
// it, so that a changed value or a deleted Secret is seen by the next
// command.
package sandboxenv

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/sandboxspec"
)

// Resolver resolves declared env with the controller's settings.
type Resolver struct {
	// Reader reads Secrets. It must read from the API server (the
	// manager's API reader), so that no Secret is ever cached.
	Reader client.Reader
	// DenyEnv is --deny-env: names refused besides
	// sandboxspec.DefaultDenyEnv.
	DenyEnv []string
	// Passthrough is --env-passthrough: each listed name with its value in
	// the controller's environment as it started (nil when unset).
	Passthrough map[string]*string
}

// Resolve returns the sandbox's declared env as KEY=VALUE, in order. A
// declaration that cannot be honoured is a *sandboxspec.InvalidError whose
// reason the callers put in their conditions and messages: a denied or
// invalid name (DeniedEnv, InvalidSpec), a variable the controller does
// not pass through (ControllerEnvNotAllowed), a Secret or key that does not
// exist (SecretNotFound), a Secret of Kubernetes API credentials
// (SecretNotAllowed). Any other error is one of reading a Secret, to retry.
func (r Resolver) Resolve(ctx context.Context, sbx *afev1.Sandbox) ([]string, error) {
	if err := sandboxspec.ValidateEnv(sbx.Spec.Env, r.DenyEnv, sandboxspec.PassthroughSet(r.Passthrough)); err != nil {
		return nil, err
	}
	out := make([]string, 0, len(sbx.Spec.Env))
	for _, e := range sbx.Spec.Env {
		v, err := r.value(ctx, sbx.Namespace, e)
		if err != nil {
			return nil, err
		}
		out = append(out, e.Name+"="+v)
	}
	return out, nil
}

// value is the value of one declared variable.
func (r Resolver) value(ctx context.Context, namespace string, e afev1.EnvVar) (string, error) {
	if e.ValueFrom == nil {
		return e.Value, nil
	}
	if from := e.ValueFrom.ControllerEnv; from != "" {
		v := r.Passthrough[from]
		if v == nil {
			return "", &sandboxspec.InvalidError{Reason: afev1.ControllerEnvNotAllowedReason,
				Message: fmt.Sprintf("Env %s: the controller does not pass %s through", e.Name, from)}
		}
		return *v, nil
	}
	ref := e.ValueFrom.SecretKeyRef
	secret := &corev1.Secret{}
	err := r.Reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: ref.Name}, secret)
	if apierrors.IsNotFound(err) {
		return "", &sandboxspec.InvalidError{Reason: afev1.SecretNotFoundReason,
			Message: fmt.Sprintf("Env %s: Secret %s does not exist", e.Name, ref.Name)}
	}
	if err != nil {
		return "", fmt.Errorf("get secret %s: %w", ref.Name, err)
	}
	if err := CheckSecret(e.Name, secret); err != nil {
		return "", err
	}
	v, ok := secret.Data[ref.Key]
	if !ok {
		return "", &sandboxspec.InvalidError{Reason: afev1.SecretNotFoundReason,
			Message: fmt.Sprintf("Env %s: Secret %s has no key %s", e.Name, ref.Name, ref.Key)}
	}
	return string(v), nil
}

// deniedSecretTypes are the Secrets whose keys never enter a sandbox: they
// are credentials of the Kubernetes API, which would let the workload act
// as a service account (or join a node) beyond the namespace it was given.
var deniedSecretTypes = map[corev1.SecretType]string{
	corev1.SecretTypeServiceAccountToken: "a service-account token",
	corev1.SecretTypeBootstrapToken:      "a bootstrap token",
}

// CheckSecret refuses a Secret an env var may not read (SecretNotAllowed).
func CheckSecret(envName string, secret *corev1.Secret) error {
	what, denied := deniedSecretTypes[secret.Type]
	if !denied {
		return nil
	}
	return &sandboxspec.InvalidError{Reason: afev1.SecretNotAllowedReason, Message: fmt.Sprintf(
		"Env %s: Secret %s is %s (type %s); Kubernetes API credentials never enter a sandbox. Put the value the sandbox needs in an Opaque Secret",
		envName, secret.Name, what, secret.Type)}
}
