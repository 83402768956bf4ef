package run

import (
	"context"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// Processes names the processes of one attempt and the container they run
// in: what the integration suite ends directly, against the real engine,
// to prove the containment of a Run (its deadline's kill and the sweep
// after its end) without waiting for a Run to reach that point.
type Processes struct {
	Container   string
	ContainerID string
	// GID is the attempt's own group; SandboxGID the sandbox user's.
	GID        int
	SandboxGID int
}

func (p Processes) attempt() *attempt {
	return &attempt{container: p.Container, containerID: p.ContainerID, gid: p.GID, sandboxGID: p.SandboxGID}
}

// EndProcesses is endAttempt: it ends every process of the group within
// KillGrace, and tells whether that took removing the container.
func (r *Reconciler) EndProcesses(ctx context.Context, p Processes, uid int) bool {
	return r.endAttempt(ctx, p.attempt(), uid)
}

// SweepProcesses is sweepAttempt: it kills what is left of the group once
// the Run's attempt ended, and tells whether that took removing the
// container.
func (r *Reconciler) SweepProcesses(ctx context.Context, run *afev1.Run, p Processes, uid int, unclean bool) bool {
	return r.sweepAttempt(ctx, run, p.attempt(), uid, unclean)
}
