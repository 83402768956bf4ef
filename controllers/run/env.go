package run

import (
	"context"
	"fmt"
	"time"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/sandboxspec"
)

// envRefused are the reasons a sandbox's declared env cannot be given to
// its commands, as the Sandbox says them and a Run finds them.
var envRefused = map[string]bool{
	afev1.SecretNotFoundReason:          true,
	afev1.SecretNotAllowedReason:        true,
	afev1.ControllerEnvNotAllowedReason: true,
}

// envRetry is how soon a Run waiting for its sandbox's env looks again:
// Secrets are not watched (nor cached), as for the Sandbox.
const envRetry = 15 * time.Second

// envMessage is the message of a Run that waits for its sandbox's env.
func envMessage(sandbox, why string) string {
	return fmt.Sprintf("The env of sandbox %s cannot be given to the Run: %s", sandbox, why)
}

// attemptEnv is the sandbox's declared env, resolved afresh for an attempt
// (a value changed or a Secret deleted since the sandbox was made is seen
// here), for the attempt's steps; nil for a Snapshot, which executes
// nothing in the sandbox. A declaration that cannot be honoured is a
// *sandboxspec.InvalidError.
func (r *Reconciler) attemptEnv(ctx context.Context, run *afev1.Run, sbx *afev1.Sandbox) ([]string, error) {
	if run.Spec.Builtin == afev1.BuiltinSnapshot {
		return nil, nil
	}
	return r.Config.EnvResolver(r.APIReader).Resolve(ctx, sbx)
}

// waitForEnv keeps the Run Pending, before anything of an attempt is done
// or counted, while its sandbox's env cannot be resolved: the conditions
// carry the refusal's reason (SecretNotFound, SecretNotAllowed,
// ControllerEnvNotAllowed, ...) and message, and the Run looks again in a
// while.
func (r *Reconciler) waitForEnv(s *runScope, sbx *afev1.Sandbox, ie *sandboxspec.InvalidError) error {
	s.requeue = envRetry
	return r.waitFor(s, ie.Reason, envMessage(sbx.Name, ie.Message))
}
