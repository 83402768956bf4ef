package plan

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/enginespec"
	"afe.dev/sandbox/internal/sandboxspec"
)

// ContainerAction is what to do with a sandbox's container.
type ContainerAction string

const (
	// ContainerKeep leaves the container as it is: it runs, matches the
	// spec and is not what remains of a pending loss.
	ContainerKeep ContainerAction = "Keep"
	// ContainerCreate makes the container: there is none, and none was
	// there before.
	ContainerCreate ContainerAction = "Create"
	// ContainerRecreate replaces a container that no longer matches the
	// spec (its spec-hash differs); the workspace is kept.
	ContainerRecreate ContainerAction = "Recreate"
	// ContainerRecordLoss records a loss: the container is gone or has
	// exited. The loss is written before its cleanup, then the container
	// is recreated with a fresh workspace.
	ContainerRecordLoss ContainerAction = "RecordLoss"
	// ContainerResumeLoss goes on with a loss recorded earlier that has no
	// running replacement yet: its cleanup and recreation.
	ContainerResumeLoss ContainerAction = "ResumeLoss"
	// ContainerRemoveOrphan removes the container of the name, left by an
	// earlier Sandbox of this namespace and name; the decision is then
	// made again without it.
	ContainerRemoveOrphan ContainerAction = "RemoveOrphan"
	// ContainerNotAdopted leaves alone the container of the name: it
	// belongs to another sandbox or controller instance.
	ContainerNotAdopted ContainerAction = "NotAdopted"
	// ContainerStart starts again the stopped container of a suspended
	// sandbox that is resumed: not a loss.
	ContainerStart ContainerAction = "Start"
	// ContainerReplaceUnstarted replaces a container that was created and
	// never started (the manager stopped between the two): nothing ran in
	// it, so nothing was lost; the workspace is kept and nobody requeued.
	ContainerReplaceUnstarted ContainerAction = "ReplaceUnstarted"
)

// NeedsImage tells whether the action makes a container: the image is then
// looked at before anything is removed, so that an image that cannot be
// pulled leaves a running container of an earlier spec in place.
func (a ContainerAction) NeedsImage() bool {
	switch a {
	case ContainerCreate, ContainerRecreate, ContainerRecordLoss, ContainerResumeLoss, ContainerReplaceUnstarted:
		return true
	}
	return false
}

// Container decides what to do with the sandbox's container from the
// sandbox's status, the container the engine has under its name (nil when
// none) and the spec-hash the spec wants.
func Container(st *afev1.SandboxStatus, have *enginespec.Container, id sandboxspec.Identity, wantHash string) ContainerAction {
	switch {
	case have != nil && id.Stale(have.Labels, afev1.RoleSandbox):
		return ContainerRemoveOrphan
	case have != nil && !id.OwnsAs(have.Labels, afev1.RoleSandbox):
		return ContainerNotAdopted
	case have != nil && !have.Running && WasSuspended(st):
		if have.Labels[afev1.LabelSpecHash] != wantHash {
			return ContainerRecreate
		}
		return ContainerStart
	case lossPending(st, have):
		return ContainerResumeLoss
	case have != nil && !have.Running && have.StartedAt.IsZero():
		return ContainerReplaceUnstarted
	case have == nil && st.ContainerID != "", have != nil && !have.Running:
		return ContainerRecordLoss
	case have == nil:
		return ContainerCreate
	case have.Labels[afev1.LabelSpecHash] != wantHash:
		return ContainerRecreate
	}
	return ContainerKeep
}

// lossPending is true while a recorded loss has no running replacement: a
// container started after the loss is the replacement.
func lossPending(st *afev1.SandboxStatus, have *enginespec.Container) bool {
	c := meta.FindStatusCondition(st.Conditions, afev1.ContainerReadyCondition)
	if c == nil || c.Reason != afev1.SandboxLostReason || c.Status == metav1.ConditionTrue {
		return false
	}
	if have == nil || !have.Running || st.LastLostTime == nil {
		return true
	}
	return have.StartedAt.Before(st.LastLostTime.Time)
}
