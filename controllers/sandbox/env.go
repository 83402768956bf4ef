package sandbox

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/sandboxspec"
)

// resolveEnv returns the declared env as KEY=VALUE, reading Secrets directly.
func (r *Reconciler) resolveEnv(ctx context.Context, sbx *afev1.Sandbox) ([]string, error) {
	out := make([]string, 0, len(sbx.Spec.Env))
	for _, e := range sbx.Spec.Env {
		if e.ValueFrom == nil {
			out = append(out, e.Name+"="+e.Value)
			continue
		}
		if from := e.ValueFrom.ControllerEnv; from != "" {
			// Validated against --env-passthrough before this.
			v := r.Config.EnvPassthrough[from]
			if v == nil {
				return nil, &sandboxspec.InvalidError{Reason: afev1.ControllerEnvNotAllowedReason,
					Message: fmt.Sprintf("Env %s: the controller does not pass %s through", e.Name, from)}
			}
			out = append(out, e.Name+"="+*v)
			continue
		}
		ref := e.ValueFrom.SecretKeyRef
		secret := &corev1.Secret{}
		err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: sbx.Namespace, Name: ref.Name}, secret)
		if apierrors.IsNotFound(err) {
			return nil, &sandboxspec.InvalidError{Reason: afev1.SecretNotFoundReason,
				Message: fmt.Sprintf("Env %s: Secret %s does not exist", e.Name, ref.Name)}
		}
		if err != nil {
			return nil, fmt.Errorf("get secret %s: %w", ref.Name, err)
		}
		if err := checkSecret(e.Name, secret); err != nil {
			return nil, err
		}
		v, ok := secret.Data[ref.Key]
		if !ok {
			return nil, &sandboxspec.InvalidError{Reason: afev1.SecretNotFoundReason,
				Message: fmt.Sprintf("Env %s: Secret %s has no key %s", e.Name, ref.Name, ref.Key)}
		}
		out = append(out, e.Name+"="+string(v))
	}
	return out, nil
}

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
