package sandbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/sandboxspec"
)

// runtimeRetry is how often a sandbox whose runtime the engine lacks looks
// again.
const runtimeRetry = 30 * time.Second

// resolveRuntime finds the sandbox's runtime on the engine: one the
// controller allows but the engine does not have is RuntimeUnavailable,
// looked for again every runtimeRetry; nothing is created meanwhile.
func (r *Reconciler) resolveRuntime(ctx context.Context, s *sandboxScope, vopts sandboxspec.Options) error {
	name := sandboxspec.RuntimeOf(&s.sbx.Spec.SandboxTemplateSpec, vopts)
	rt, err := r.Engine.Runtime(ctx, name)
	if errors.Is(err, docker.ErrNotFound) {
		return &sandboxspec.InvalidError{Reason: afev1.RuntimeUnavailableReason, Message: fmt.Sprintf(
			"The engine has no runtime %q, which --runtimes allows: register it with the engine (hack/install-runsc.sh for runsc) or remove it from --runtimes; retrying", name)}
	}
	if err != nil {
		return err
	}
	if err := sandboxspec.UsableRuntime(rt); err != nil {
		return err
	}
	s.resolved.Runtime = rt
	s.sbx.Status.Runtime = name
	return nil
}
