package plan

import (
	"time"

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
	// ContainerStopOverDisk stops a sandbox measured over its
	// resources.disk: its container is removed (the workspace kept) and
	// not made again while it is over.
	ContainerStopOverDisk ContainerAction = "StopOverDisk"
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

// ContainerInput is what the plan of a sandbox's container is decided from.
type ContainerInput struct {
	// Status is the sandbox's status. Whoever may write sandboxes/status
	// can forge it: it only changes how this sandbox's own container,
	// verified by its labels, comes back.
	Status *afev1.SandboxStatus
	// Have is the container the engine has under the sandbox's name; nil
	// when none.
	Have *enginespec.Container
	ID   sandboxspec.Identity
	// WantHash is the spec-hash the spec wants.
	WantHash string
	// OverDisk: the sandbox is measured over its resources.disk.
	OverDisk bool
	// Crashes is the sandbox's run of crashes so far.
	Crashes CrashRun
	Now     time.Time
}

// ContainerPlan is what to do with the sandbox's container, in order.
type ContainerPlan struct {
	// RemoveOrphan: Have was left by an earlier Sandbox of this namespace
	// and name, not a conflict. It is removed first, and Action is what to
	// do without it.
	RemoveOrphan bool
	Action       ContainerAction
	// Crashes is the run of crashes to remember once Action is carried
	// out: a loss adds to it or ends it.
	Crashes CrashRun
	// Wait is, for a loss, how long the replacement still waits
	// (crash-loop back-off), WaitWhy saying why in words.
	Wait    time.Duration
	WaitWhy string
}

// Container decides what to do with the sandbox's container.
func Container(in ContainerInput) ContainerPlan {
	p := ContainerPlan{Crashes: in.Crashes}
	if in.Have != nil && in.ID.Stale(in.Have.Labels, afev1.RoleSandbox) {
		p.RemoveOrphan, in.Have = true, nil
	}
	p.Action = containerAction(in.Status, in.Have, in.ID, in.WantHash)
	switch {
	case p.Action == ContainerNotAdopted:
		return p
	case in.OverDisk:
		p.Action = ContainerStopOverDisk
		return p
	case p.Action == ContainerRecordLoss:
		var started time.Time
		if in.Have != nil {
			started = in.Have.StartedAt
		}
		p.Crashes = in.Crashes.AfterLoss(started, in.Now)
	case p.Action == ContainerResumeLoss && in.Have == nil:
		// Gone while its loss was pending: removed by someone with
		// engine access (docker rm -f shows as an exit first), no crash.
		p.Crashes = CrashRun{}
	case p.Action != ContainerResumeLoss:
		return p
	}
	p.Wait, p.WaitWhy = p.Crashes.Wait(in.Now)
	return p
}

// containerAction is what to do with have, a container of the sandbox's
// name that is no orphan.
func containerAction(st *afev1.SandboxStatus, have *enginespec.Container, id sandboxspec.Identity, wantHash string) ContainerAction {
	switch {
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
