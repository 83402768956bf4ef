// Package status computes the summary parts of status (Ready, phase) from the
// conditions the reconcilers set. It is pure, so it is table-tested.
package status

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// sandboxParts are the conditions that make up a sandbox's Ready, in the
// order they are worked on.
var sandboxParts = []string{
	afev1.WorkspaceReadyCondition,
	afev1.EgressReadyCondition,
	afev1.ContainerReadyCondition,
}

// terminalReasons need the user to change something.
var terminalReasons = map[string]bool{
	afev1.InvalidSpecReason:            true,
	afev1.DeniedEnvReason:              true,
	afev1.SecretNotFoundReason:         true,
	afev1.SecretNotAllowedReason:       true,
	afev1.UserNotAllowedReason:         true,
	afev1.RuntimeNotAllowedReason:      true,
	afev1.WorkspaceOutsideRootReason:   true,
	afev1.NameConflictReason:           true,
	afev1.SnapshotNotFoundReason:       true,
	afev1.WorkspaceSymlinkReason:       true,
	afev1.WorkspaceConflictReason:      true,
	afev1.WorkspaceNotSharedReason:     true,
	afev1.WorkspaceMountMismatchReason: true,
	afev1.DiskQuotaExceededReason:      true,
	afev1.DeadlineExceededReason:       true,
}

// waitingReasons block provisioning until something outside changes.
var waitingReasons = map[string]bool{
	afev1.ImagePullFailedReason:      true,
	afev1.EngineUnavailableReason:    true,
	afev1.EgressNetworkMissingReason: true,
	afev1.ProxyNotAnsweringReason:    true,
	afev1.RuntimeUnavailableReason:   true,
}

// SummarizeSandbox sets the Ready condition and the phase from the other
// conditions, and readyTime when the sandbox becomes Ready.
func SummarizeSandbox(st *afev1.SandboxStatus, generation int64, deleting bool, now metav1.Time) {
	ready := metav1.Condition{
		Type:               afev1.SandboxReadyCondition,
		Status:             metav1.ConditionTrue,
		Reason:             afev1.ReadyReason,
		Message:            "The sandbox is ready",
		ObservedGeneration: generation,
	}
	// The first part that is not ready explains Ready, unless a part needs
	// the user to fix something (said first) or the engine is away (said
	// next): those say more than "waiting".
	var blocking *metav1.Condition
	for _, t := range sandboxParts {
		c := meta.FindStatusCondition(st.Conditions, t)
		switch {
		case c == nil:
			if blocking == nil {
				blocking = &metav1.Condition{Reason: afev1.ProvisioningReason, Message: "Waiting for " + t}
			}
		case c.Status != metav1.ConditionTrue && (blocking == nil || priority(c.Reason) > priority(blocking.Reason)):
			blocking = c
		}
	}
	if blocking != nil {
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, blocking.Reason, blocking.Message
	}
	if deleting {
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, afev1.DeletingReason, "The sandbox is being deleted"
	}
	wasReady := meta.IsStatusConditionTrue(st.Conditions, afev1.SandboxReadyCondition)
	meta.SetStatusCondition(&st.Conditions, ready)
	if ready.Status == metav1.ConditionTrue && (!wasReady || st.ReadyTime == nil) {
		st.ReadyTime = &now
	}
	st.Phase = sandboxPhase(st, ready, deleting)
}

// priority orders the reasons that explain a sandbox that is not Ready.
func priority(reason string) int {
	switch {
	case reason == afev1.SuspendedReason:
		return 3
	case terminalReasons[reason]:
		return 2
	case reason == afev1.EngineUnavailableReason:
		return 1
	}
	return 0
}

func sandboxPhase(st *afev1.SandboxStatus, ready metav1.Condition, deleting bool) afev1.SandboxPhase {
	switch {
	case deleting:
		return afev1.SandboxTerminating
	case ready.Status == metav1.ConditionTrue:
		return afev1.SandboxReady
	case ready.Reason == afev1.SuspendedReason:
		return afev1.SandboxSuspended
	case terminalReasons[ready.Reason]:
		return afev1.SandboxFailed
	case ready.Reason == afev1.SandboxLostReason || ready.Reason == afev1.SpecChangedReason:
		return afev1.SandboxRecreating
	case waitingReasons[ready.Reason] || st.ContainerID == "" && len(st.Conditions) <= 1:
		// Waiting for something outside: the engine, an image, the proxy.
		return afev1.SandboxPending
	default:
		return afev1.SandboxProvisioning
	}
}
