package run

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/controllers/folders"
	"afe.dev/sandbox/controllers/identity"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/builtin"
	"afe.dev/sandbox/internal/naming"
	"afe.dev/sandbox/internal/sandboxspec"
)

// snapshotJob is what a Snapshot Run copies, read from its sandbox when the
// attempt starts.
type snapshotJob struct {
	id    sandboxspec.Identity
	image string
	// source is the sandbox's workspace: its volume or its host folder.
	source docker.Mount
	// ticketUID is the UID of the sandbox's Ticket, if any.
	ticketUID string
	// maxBytes bounds the copy (config.Options.CopyBytes; 0: nothing).
	maxBytes int64
	// user is the sandbox's uid:gid, the owner of its files: a sandbox
	// restored from the snapshot with another user is given them.
	user string
}

// snapshotJobOf reads the workspace of the sandbox. A host folder is
// checked as for the sandbox's container (the engine binds its path to copy
// it, as root): inside the namespace's folder, no symbolic link on the way,
// and no container of another Sandbox with an overlapping folder, which
// could swap a component of the path.
func (r *Reconciler) snapshotJobOf(ctx context.Context, sbx *afev1.Sandbox) (*snapshotJob, error) {
	job := &snapshotJob{id: sandboxspec.IdentityOf(sbx, r.Config.Instance), image: sbx.Spec.Image, maxBytes: r.Config.CopyBytes(sbx)}
	if ref := metav1.GetControllerOf(sbx); ref != nil && ref.Kind == "Ticket" {
		job.ticketUID = string(ref.UID)
	}
	if sbx.Spec.Workspace.Type == afev1.WorkspaceFolder {
		f, err := sandboxspec.ResolveFolder(sbx.Spec.Workspace.HostPath, sbx.Namespace, r.Config.Workspaces())
		if err != nil {
			return nil, err
		}
		c, err := folders.FindConflict(ctx, r.Client, r.Engine, r.Config, sbx, f.Path)
		if err != nil {
			return nil, err
		}
		if c != nil {
			return nil, &sandboxspec.InvalidError{Reason: afev1.WorkspaceConflictReason, Message: c.Message(f.Path)}
		}
		job.source = docker.Mount{Type: docker.MountBind, Source: f.Path}
		return job, nil
	}
	v, err := identity.WorkspaceVolume(ctx, r.Engine, job.id)
	if err != nil {
		return nil, fmt.Errorf("the workspace volume: %w", err)
	}
	job.source = docker.Mount{Type: docker.MountVolume, Source: v.Name}
	return job, nil
}

// snapshotLabels are the labels of a Run's snapshot volume: the sandbox's,
// with the Run and the ticket.
func snapshotLabels(job *snapshotJob, run *afev1.Run, role string) map[string]string {
	l := job.id.Labels(role)
	l[afev1.LabelRun] = run.Name
	l[afev1.LabelRunUID] = string(run.UID)
	if job.ticketUID != "" {
		l[afev1.LabelTicketUID] = job.ticketUID
	}
	if job.user != "" {
		l[afev1.LabelUser] = job.user
	}
	return l
}

// executeSnapshot copies the workspace into a new snapshot volume within the
// Run's timeout. An attempt executed again after a crash finds the volume
// of the attempt before by the Run's UID and makes it again, under the same
// name.
func (r *Reconciler) executeSnapshot(ctx context.Context, run *afev1.Run, a *attempt, timeout time.Duration, o *outcome) {
	log := logf.FromContext(ctx)
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	job := a.snapshot
	name, err := r.snapshotVolume(cctx, run, job)
	var copied int64
	if err == nil {
		copied, err = r.Engine.CopyWorkspace(cctx, docker.CopySpec{
			Name:   naming.CopyHelper(name),
			Image:  job.image,
			Labels: snapshotLabels(job, run, afev1.RoleSnapshotCopy),
			From:   job.source,
			To:     docker.Mount{Type: docker.MountVolume, Source: name},
			// A workspace whose files take more than its disk limit at
			// their full size (sparse ones) is not copied past it.
			MaxBytes: job.maxBytes,
		})
	}
	if err == nil {
		log.Info("Snapshot taken", "volume", name, "bytes", copied, "duration", time.Since(o.started))
		o.result = builtin.Fields(map[string]any{"snapshot": name})
		o.snapshot = name
		o.output = fmt.Sprintf("afe: copied %s (%d bytes of tar) into snapshot volume %s\n", sandboxspec.WorkspacePath, copied, name)
		return
	}
	if name != "" {
		// A partial copy is no snapshot: also when the Run was deleted or
		// the controller is stopping (an attempt executed again makes it
		// again).
		rmCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), killTimeout)
		defer cancel()
		if rerr := r.Engine.RemoveVolume(rmCtx, name); rerr != nil {
			log.Error(rerr, "Remove a partial snapshot", "volume", name)
		}
	}
	switch {
	case ctx.Err() != nil:
		o.abandoned = true
		return
	case errors.Is(cctx.Err(), context.DeadlineExceeded):
		o.timedOut, o.exitCode = true, 137
		o.output = fmt.Sprintf("afe: the copy into %s did not finish within %s\n", name, timeout)
		return
	}
	o.failReason, o.failMessage = afev1.SnapshotFailedReason, "The workspace could not be copied: "+err.Error()
}

// snapshotVolume creates the Run's snapshot volume, empty, and returns its
// name: the one of an earlier attempt of the Run, or the next number of the
// sandbox. Numbers are counted over every snapshot of the sandbox's name
// (also of an earlier Sandbox of that name), and a name another Run took
// meanwhile is skipped.
func (r *Reconciler) snapshotVolume(ctx context.Context, run *afev1.Run, job *snapshotJob) (string, error) {
	existing, err := r.Engine.ListVolumes(ctx, job.id.NameSelector(afev1.RoleSnapshot))
	if err != nil {
		return "", err
	}
	var names []string
	for _, v := range existing {
		if v.Labels[afev1.LabelRunUID] != string(run.UID) {
			names = append(names, v.Name)
			continue
		}
		// An earlier attempt's copy, maybe partial: made again. Its copy
		// helpers, found by the Run's labels, go first.
		if err := identity.RemoveContainers(ctx, r.Engine, map[string]string{
			afev1.LabelController: job.id.Instance,
			afev1.LabelRunUID:     string(run.UID),
			afev1.LabelRole:       afev1.RoleSnapshotCopy,
		}); err != nil {
			return "", err
		}
		if err := r.Engine.RemoveVolume(ctx, v.Name); err != nil {
			return "", err
		}
		return r.createSnapshotVolume(ctx, run, job, v.Name)
	}
	n := naming.NextSnapshot(job.id.Key, names)
	for i := 0; i < 16; i++ {
		name, err := r.createSnapshotVolume(ctx, run, job, naming.Snapshot(job.id.Key, n+i))
		if !errors.Is(err, docker.ErrConflict) {
			return name, err
		}
	}
	return "", fmt.Errorf("no free snapshot name after %s: %w", naming.Snapshot(job.id.Key, n), docker.ErrConflict)
}

// createSnapshotVolume creates the volume; ErrConflict when the name is
// another's.
func (r *Reconciler) createSnapshotVolume(ctx context.Context, run *afev1.Run, job *snapshotJob, name string) (string, error) {
	v, err := r.Engine.EnsureVolume(ctx, docker.VolumeSpec{Name: name, Labels: snapshotLabels(job, run, afev1.RoleSnapshot)})
	if err != nil {
		return "", err
	}
	if v.Labels[afev1.LabelRunUID] != string(run.UID) {
		return "", fmt.Errorf("volume %s: %w", name, docker.ErrConflict)
	}
	return name, nil
}

// recordSnapshot adds a snapshot to its Sandbox's status.snapshots (the
// most recent MaxSandboxSnapshots), over the latest version of the Sandbox.
func (r *Reconciler) recordSnapshot(ctx context.Context, run *afev1.Run, volume string, at metav1.Time) error {
	key := types.NamespacedName{Namespace: run.Namespace, Name: run.Spec.SandboxRef.Name}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sbx := &afev1.Sandbox{}
		if err := r.Get(ctx, key, sbx); err != nil {
			return client.IgnoreNotFound(err)
		}
		before := sbx.DeepCopy()
		sbx.Status.Snapshots = upsertSnapshot(sbx.Status.Snapshots, afev1.SandboxSnapshot{Name: volume, Run: run.Name, Time: at})
		patch := client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})
		return client.IgnoreNotFound(r.Status().Patch(ctx, sbx, patch))
	})
}

// upsertSnapshot puts s in the list (replacing one of its name), oldest
// first, keeping the most recent MaxSandboxSnapshots.
func upsertSnapshot(list []afev1.SandboxSnapshot, s afev1.SandboxSnapshot) []afev1.SandboxSnapshot {
	out := make([]afev1.SandboxSnapshot, 0, len(list)+1)
	for _, have := range list {
		if have.Name != s.Name {
			out = append(out, have)
		}
	}
	out = append(out, s)
	if over := len(out) - afev1.MaxSandboxSnapshots; over > 0 {
		out = out[over:]
	}
	return out
}

// discardSnapshot removes what a Snapshot Run that did not complete left
// behind: copy helpers and a partial snapshot volume, found by the Run's
// UID. It runs when the Run fails or is deleted before its end, also when
// the attempt was cut short by a crash and is not executed again.
func (r *Reconciler) discardSnapshot(ctx context.Context, run *afev1.Run) error {
	if run.Spec.Builtin != afev1.BuiltinSnapshot {
		return nil
	}
	labels := map[string]string{afev1.LabelController: r.Config.Instance, afev1.LabelRunUID: string(run.UID)}
	if err := identity.RemoveContainers(ctx, r.Engine, labels); err != nil {
		return err
	}
	labels[afev1.LabelRole] = afev1.RoleSnapshot
	return identity.RemoveVolumes(ctx, r.Engine, labels)
}
