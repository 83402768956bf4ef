package sandbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/controllers/identity"
	"afe.dev/sandbox/controllers/writes"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/metrics"
	"afe.dev/sandbox/internal/naming"
	"afe.dev/sandbox/internal/plan"
	"afe.dev/sandbox/internal/sandboxspec"
)

// startFailedRetry is how often a container the engine could not start is
// tried again (a spec change tries at once).
const startFailedRetry = 30 * time.Second

func (s *sandboxScope) containerName() string { return naming.Container(s.id.Key) }

// notAdopted states in the condition that the named object belongs to
// another sandbox or controller instance: it is left alone, and looked at
// again after writes.ConflictRetry.
func (s *sandboxScope) notAdopted(condType, kind, name string) (ctrl.Result, error) {
	writes.SetCondition(s.sbx, condType, false, afev1.NameConflictReason,
		fmt.Sprintf("%s %s belongs to another sandbox or controller instance and is not adopted", kind, name))
	return ctrl.Result{RequeueAfter: writes.ConflictRetry}, nil
}

// ensureImage makes the image present; one that cannot be pulled is stated
// in the condition, as what the image is for ("Image", "Proxy image").
func (r *Reconciler) ensureImage(ctx context.Context, s *sandboxScope, condType, what, image string) error {
	err := r.Engine.EnsureImage(ctx, image)
	var pe *docker.PullError
	if errors.As(err, &pe) {
		writes.SetCondition(s.sbx, condType, false, afev1.ImagePullFailedReason,
			fmt.Sprintf("%s %s is not present and could not be pulled: %s", what, pe.Ref, pe.Reason))
	}
	return err
}

// removeStale removes the containers of the earlier Sandbox of this
// namespace and name that labels (a stale object's) name: they hold the
// objects of that Sandbox, which no longer exists.
func (r *Reconciler) removeStale(ctx context.Context, s *sandboxScope, labels map[string]string) error {
	logf.FromContext(ctx).Info("Removing the containers of an earlier sandbox of this name", "uid", labels[afev1.LabelSandboxUID])
	sel := s.id.NameSelector("")
	sel[afev1.LabelSandboxUID] = labels[afev1.LabelSandboxUID]
	return identity.RemoveContainers(ctx, r.Engine, sel)
}

// reconcileContainer runs the hardened container and keeps it running with
// the current spec: a lost container is recreated with a fresh workspace, a
// drifted one is recreated keeping the workspace. What to do is decided by
// plan.Container; this carries it out.
func (r *Reconciler) reconcileContainer(ctx context.Context, s *sandboxScope) (ctrl.Result, error) {
	if s.claimed != nil {
		return r.claimedContainer(ctx, s)
	}
	sbx := s.sbx
	want := sandboxspec.Container(sbx, s.id, s.resolved)
	sbx.Status.ContainerName = want.Name
	have, err := r.Engine.InspectContainer(ctx, want.Name)
	if err != nil && !errors.Is(err, docker.ErrNotFound) {
		return ctrl.Result{}, err
	}
	overWhy, over := r.Disk.OverDisk(sbx)
	p := plan.Container(plan.ContainerInput{Status: &sbx.Status, Have: have, ID: s.id,
		WantHash: want.Labels[afev1.LabelSpecHash], OverDisk: over, Crashes: r.mem.crashes.run(sbx.UID), Now: time.Now()})
	if p.RemoveOrphan {
		if err := r.removeStale(ctx, s, have.Labels); err != nil {
			return ctrl.Result{}, err
		}
		have = nil
	}
	switch {
	case p.Action == plan.ContainerNotAdopted:
		return s.notAdopted(afev1.ContainerReadyCondition, "Container", want.Name)
	case p.Action == plan.ContainerStopOverDisk:
		return ctrl.Result{}, r.stopOverDisk(ctx, s, have, overWhy)
	case p.Action.NeedsImage():
		if err := r.ensureImage(ctx, s, afev1.ContainerReadyCondition, "Image", want.Image); err != nil {
			return ctrl.Result{}, err
		}
	}
	have, res, err := r.actOnContainer(ctx, s, want, have, p)
	if err != nil || !res.IsZero() {
		return res, err
	}
	if p.Action != plan.ContainerKeep && p.Action != plan.ContainerStart {
		created, res, err := r.createContainer(ctx, s, want)
		if created == nil {
			return res, err
		}
		if s.user != nil {
			if err := s.user.Verify(ctx, r.Engine, created); err != nil {
				return ctrl.Result{}, err
			}
		}
		have = created
	}
	sbx.Status.ContainerID = have.ID
	writes.SetCondition(sbx, afev1.ContainerReadyCondition, true, afev1.ReadyReason, "Container "+want.Name+" is running")
	s.moving = false // its container runs here now
	r.resumed(ctx, s)
	return ctrl.Result{}, nil
}

// actOnContainer carries out what plan.Container decided but the creation:
// it returns the container as it then is (nil once removed), or a result
// or an error that ends the phase.
func (r *Reconciler) actOnContainer(ctx context.Context, s *sandboxScope, want docker.ContainerSpec, have *docker.Container, p plan.ContainerPlan) (*docker.Container, ctrl.Result, error) {
	log := logf.FromContext(ctx)
	sbx := s.sbx
	switch p.Action {
	case plan.ContainerRecordLoss, plan.ContainerResumeLoss:
		res, err := r.replaceLost(ctx, s, have, p)
		return nil, res, err
	case plan.ContainerStart:
		return r.startStopped(ctx, s, want, have)
	case plan.ContainerCreate:
		writes.SetCondition(sbx, afev1.ContainerReadyCondition, false, afev1.ProvisioningReason, "Creating the container")
	case plan.ContainerReplaceUnstarted:
		log.Info("Replacing a container that was created and never started", "container", want.Name)
		writes.SetCondition(sbx, afev1.ContainerReadyCondition, false, afev1.ProvisioningReason, "Creating the container")
		if err := r.Engine.RemoveContainer(ctx, have.ID); err != nil {
			return nil, ctrl.Result{}, err
		}
	case plan.ContainerRecreate:
		log.Info("Recreating drifted container", "container", want.Name)
		writes.SetCondition(sbx, afev1.ContainerReadyCondition, false, afev1.SpecChangedReason,
			"The container does not match the spec and is being recreated; the workspace is kept")
		if err := r.Engine.RemoveContainer(ctx, have.ID); err != nil {
			return nil, ctrl.Result{}, err
		}
		metrics.Recreations.WithLabelValues("drift").Inc()
		r.Recorder.Eventf(sbx, nil, corev1.EventTypeNormal, afev1.SpecChangedReason, "Recreate",
			"Container %s no longer matched the spec and is recreated; the workspace is kept", want.Name)
	}
	return have, ctrl.Result{}, nil
}

// replaceLost records a loss (commitLoss, unless a recorded one is being
// finished) and, once the crash back-off the plan gives allows, removes
// what is left of it for the creation that follows.
func (r *Reconciler) replaceLost(ctx context.Context, s *sandboxScope, have *docker.Container, p plan.ContainerPlan) (ctrl.Result, error) {
	sbx := s.sbx
	if p.Action == plan.ContainerRecordLoss {
		if err := r.commitLoss(ctx, s, have); err != nil {
			return ctrl.Result{}, err
		}
	}
	r.mem.crashes.set(sbx.UID, p.Crashes)
	if p.Wait > 0 {
		// A crash-looping container waits, exited, for its replacement.
		writes.SetCondition(sbx, afev1.ContainerReadyCondition, false, afev1.SandboxLostReason, p.WaitWhy)
		return ctrl.Result{RequeueAfter: p.Wait}, nil
	}
	return ctrl.Result{}, r.recreateAfterLoss(ctx, s, have)
}

// startStopped starts again the stopped container of a suspended sandbox.
func (r *Reconciler) startStopped(ctx context.Context, s *sandboxScope, want docker.ContainerSpec, have *docker.Container) (*docker.Container, ctrl.Result, error) {
	logf.FromContext(ctx).Info("Starting the container of a suspended sandbox", "container", want.Name)
	r.Stops.Started(have.ID)
	if err := r.Engine.StartContainer(ctx, have.ID); err != nil {
		if !errors.Is(err, docker.ErrStartFailed) {
			return nil, ctrl.Result{}, err
		}
		return nil, startFailed(s, "Container "+want.Name+" could not be started again", err), nil
	}
	started, err := r.Engine.InspectContainer(ctx, have.ID)
	if err != nil {
		return nil, ctrl.Result{}, err
	}
	return started, ctrl.Result{}, nil
}

// startFailed states a container the engine could not start (what
// happened, and err), and looks again after startFailedRetry.
func startFailed(s *sandboxScope, what string, err error) ctrl.Result {
	writes.SetCondition(s.sbx, afev1.ContainerReadyCondition, false, afev1.ContainerStartFailedReason,
		fmt.Sprintf("%s; check the image and command: %v", what, err))
	return ctrl.Result{RequeueAfter: startFailedRetry}
}

// createContainer runs the sandbox's container; nil when it did not, with
// the result and error to return.
func (r *Reconciler) createContainer(ctx context.Context, s *sandboxScope, want docker.ContainerSpec) (*docker.Container, ctrl.Result, error) {
	logf.FromContext(ctx).Info("Creating container", "container", want.Name)
	// Fresh volumes for the image's VOLUME paths, as for a new container.
	if err := r.removeImageVolumes(ctx, s); err != nil {
		return nil, ctrl.Result{}, err
	}
	var created *docker.Container
	var err error
	if s.sbx.Spec.Workspace.Type == afev1.WorkspaceFolder {
		var res ctrl.Result
		created, res, err = r.runInFolder(ctx, s, want)
		if err == nil && created == nil {
			return nil, res, nil // refused, and said so
		}
	} else {
		end := r.Cold.Start()
		created, err = r.Engine.RunContainer(ctx, want)
		end()
	}
	if errors.Is(err, docker.ErrConflict) {
		res, err := s.notAdopted(afev1.ContainerReadyCondition, "Container", want.Name)
		return nil, res, err
	}
	if errors.Is(err, docker.ErrStartFailed) {
		return nil, startFailed(s, "Container "+want.Name+" could not be started", err), nil
	}
	if err != nil {
		res, err := r.storageQuotaRefused(ctx, err)
		return nil, res, err
	}
	// No Event: the ContainerReady condition says it, and an Event is a
	// write per sandbox on the path a burst of tickets waits on.
	return created, ctrl.Result{}, nil
}

// commitLoss notes a loss in the status and commits it before the caller
// acts on it, so that a crash in the middle repeats the cleanup rather than
// forgetting it; the Event follows the write, so that a write retried after
// a conflict does not repeat it.
func (r *Reconciler) commitLoss(ctx context.Context, s *sandboxScope, have *docker.Container) error {
	sbx := s.sbx
	what := "disappeared"
	if have != nil {
		what = fmt.Sprintf("exited with code %d", have.ExitCode)
	}
	name := s.containerName()
	logf.FromContext(ctx).Info("Sandbox container lost", "container", name, "what", what)
	now := metav1.Now()
	sbx.Status.Recreations++ // counted in the metrics once written
	sbx.Status.LastLostTime = &now
	sbx.Status.ContainerID = ""
	writes.SetCondition(sbx, afev1.ContainerReadyCondition, false, afev1.SandboxLostReason,
		"The container was lost and is being recreated with a fresh workspace")
	if err := r.commit(ctx, s); err != nil {
		return err
	}
	r.Recorder.Eventf(sbx, nil, corev1.EventTypeWarning, afev1.SandboxLostReason, "Recreate",
		"Container %s %s; recreating it with a fresh workspace", name, what)
	return nil
}

// recreateAfterLoss removes what is left of a lost container and, for a
// Volume workspace, the volume, which is then created fresh (from its
// snapshot, when it has one). A Folder workspace's host folder is never
// deleted.
func (r *Reconciler) recreateAfterLoss(ctx context.Context, s *sandboxScope, have *docker.Container) error {
	if have != nil {
		if err := r.Engine.RemoveContainer(ctx, have.ID); err != nil {
			return err
		}
	}
	if s.sbx.Spec.Workspace.Type == afev1.WorkspaceFolder {
		return nil
	}
	// A workspace from a snapshot is made from it again: not without it.
	if s.sbx.Spec.Workspace.FromSnapshot != "" {
		if missing, err := r.snapshotMissing(ctx, s); err != nil || missing {
			return errors.Join(err, errSnapshotMissing)
		}
	}
	if err := r.removeOwnedVolume(ctx, s); err != nil {
		return err
	}
	v, err := r.Engine.EnsureVolume(ctx, sandboxspec.Volume(s.id))
	if err != nil {
		return err
	}
	if s.sbx.Spec.Workspace.FromSnapshot != "" {
		if err := r.restoreWorkspace(ctx, s, v.Name); err != nil {
			return err
		}
	}
	s.resolved.Workspace = v.Name
	return nil
}

// removeOwnedContainer removes the named container when it is this
// sandbox's in the role; another object's container is left alone.
func (r *Reconciler) removeOwnedContainer(ctx context.Context, s *sandboxScope, name, role string) error {
	c, err := identity.OwnedContainer(ctx, r.Engine, s.id, name, role)
	if c == nil {
		return identity.IgnoreEngineNotFound(err)
	}
	return r.Engine.RemoveContainer(ctx, c.ID)
}
