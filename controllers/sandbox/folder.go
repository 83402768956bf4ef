package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/controllers/folders"
	"afe.dev/sandbox/controllers/identity"
	"afe.dev/sandbox/controllers/writes"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/sandboxspec"
)

// Folder workspaces. The engine binds a path string, resolved again when a
// container starts, so the controller's check of the path holds only while
// nobody hostile can change a component of it. Who can write there: the
// controller (the root and the namespaces' folders), the engine host, and
// each sandbox workload below its own folder, nothing else (only
// /workspace is mounted). So no folder of a Sandbox may contain another
// Sandbox's folder, and only Sandboxes of one ticket share one: then no
// workload can write any component of another sandbox's path, and a check
// made without following links still holds when the engine binds the path.
// The check and the container's creation run under a lock per namespace
// (folders of different namespaces never overlap), over a live read of the
// Sandboxes and of the engine's containers, so that of two conflicting
// Sandboxes the second one checked always sees the first.

// folderConflictRetry is how often a Sandbox that waits for another's
// leftover container to go looks again.
const folderConflictRetry = 5 * time.Second

// folderRefusedReasons are the refusals of a Folder workspace that also
// remove a container made earlier: what it has mounted is no longer
// acceptable (a folder outside the namespace's, say, after an upgrade).
var folderRefusedReasons = map[string]bool{
	afev1.WorkspaceOutsideRootReason: true,
	afev1.WorkspaceSymlinkReason:     true,
	afev1.WorkspaceNotSharedReason:   true,
	afev1.WorkspaceRootUnsafeReason:  true,
}

// reconcileFolder checks the Sandbox's folder: where it is, that nothing
// conflicts with it (a conflict removes the Sandbox's container), and then
// that it is reached without a link. Conflicts are looked at before the
// disk, so that what is said about a pair does not depend on what a
// workload of it does to the files at that moment.
func (r *Reconciler) reconcileFolder(ctx context.Context, s *sandboxScope) (ctrl.Result, error) {
	path, err := sandboxspec.FolderOf(s.sbx.Spec.Workspace.HostPath, s.sbx.Namespace, r.Config.Workspaces())
	if err != nil {
		return r.refuseFolder(ctx, s, err)
	}
	c, err := folders.FindConflict(ctx, r.APIReader, r.Engine, r.Config, s.sbx, path)
	if err != nil {
		return ctrl.Result{}, err
	}
	if c != nil {
		return r.refuseConflict(ctx, s, path, c)
	}
	f, err := sandboxspec.ResolveFolder(s.sbx.Spec.Workspace.HostPath, s.sbx.Namespace, r.Config.Workspaces())
	if err != nil {
		return r.refuseFolder(ctx, s, err)
	}
	s.resolved.Workspace = f.Path
	s.sbx.Status.VolumeName = ""
	writes.SetCondition(s.sbx, afev1.WorkspaceReadyCondition, true, afev1.ReadyReason, "Host folder "+f.Path+" is mounted at /workspace")
	return ctrl.Result{}, nil
}

// refuseFolder reports a folder that cannot be used, on WorkspaceReady; a
// container made earlier is removed when its folder is no longer acceptable.
func (r *Reconciler) refuseFolder(ctx context.Context, s *sandboxScope, err error) (ctrl.Result, error) {
	ie, ok := sandboxspec.AsInvalid(err)
	if !ok {
		return ctrl.Result{}, err
	}
	if folderRefusedReasons[ie.Reason] {
		if err := r.dropFolderContainer(ctx, s, ie.Reason, ie.Message); err != nil {
			return ctrl.Result{}, err
		}
		// The container is gone: its condition says why, not what it was.
		writes.SetCondition(s.sbx, afev1.ContainerReadyCondition, false, ie.Reason,
			"No container while the workspace folder is refused")
	}
	return r.refuse(ctx, s, afev1.WorkspaceReadyCondition, ie)
}

// refuseConflict removes the Sandbox's container and says what it
// conflicts with. A conflict with another Sandbox's spec is looked at again
// when either changes (see folderNeighbours), and every writes.ConflictRetry in
// case an event was missed; one with a leftover container sooner.
func (r *Reconciler) refuseConflict(ctx context.Context, s *sandboxScope, path string, c *folders.Conflict) (ctrl.Result, error) {
	msg := c.Message(path)
	logf.FromContext(ctx).Info("Folder workspace conflicts", "message", msg)
	if err := r.dropFolderContainer(ctx, s, afev1.WorkspaceConflictReason, msg); err != nil {
		return ctrl.Result{}, err
	}
	writes.SetCondition(s.sbx, afev1.WorkspaceReadyCondition, false, afev1.WorkspaceConflictReason, msg)
	writes.SetCondition(s.sbx, afev1.ContainerReadyCondition, false, afev1.WorkspaceConflictReason,
		"No container while the workspace folder conflicts with another Sandbox's")
	s.sbx.Status.ObservedGeneration = s.sbx.Generation
	if c.Container != "" {
		return ctrl.Result{RequeueAfter: folderConflictRetry}, nil
	}
	return ctrl.Result{RequeueAfter: writes.ConflictRetry}, nil
}

// dropFolderContainer removes the Sandbox's container, by ID once its
// labels are checked, and forgets it, so that its absence is not taken for
// a loss later.
func (r *Reconciler) dropFolderContainer(ctx context.Context, s *sandboxScope, reason, why string) error {
	name := s.containerName()
	c, err := identity.OwnedContainer(ctx, r.Engine, s.id, name, "")
	if errors.Is(err, docker.ErrNotFound) {
		s.sbx.Status.ContainerID = ""
		return nil
	}
	if c == nil {
		return err
	}
	logf.FromContext(ctx).Info("Removing the container of a refused Folder workspace", "container", name, "reason", reason)
	if err := r.Engine.RemoveContainer(ctx, c.ID); err != nil {
		return err
	}
	s.sbx.Status.ContainerID = ""
	r.Recorder.Eventf(s.sbx, nil, corev1.EventTypeWarning, reason, "Remove", "Removed container %s: %s", name, why)
	return nil
}

// folderLock is the lock of a namespace's Folder workspaces.
func (r *Reconciler) folderLock(namespace string) *sync.Mutex {
	mu, _ := r.folderLocks.LoadOrStore(namespace, &sync.Mutex{})
	return mu.(*sync.Mutex)
}

// runInFolder creates the container of a Folder workspace: under the
// namespace's lock, it checks again for conflicts (live), walks the path
// again without following links, creates the container and then verifies
// that the engine mounted the directory it checked. A refusal is reported
// in the conditions and returns a nil container.
func (r *Reconciler) runInFolder(ctx context.Context, s *sandboxScope, want docker.ContainerSpec) (*docker.Container, ctrl.Result, error) {
	mu := r.folderLock(s.sbx.Namespace)
	mu.Lock()
	defer mu.Unlock()

	c, err := folders.FindConflict(ctx, r.APIReader, r.Engine, r.Config, s.sbx, s.resolved.Workspace)
	if err != nil {
		return nil, ctrl.Result{}, err
	}
	if c != nil {
		res, err := r.refuseConflict(ctx, s, s.resolved.Workspace, c)
		return nil, res, err
	}
	f, err := sandboxspec.ResolveFolder(s.sbx.Spec.Workspace.HostPath, s.sbx.Namespace, r.Config.Workspaces())
	if err != nil {
		res, err := r.refuseFolder(ctx, s, err)
		return nil, res, err
	}
	if f.Path != s.resolved.Workspace {
		return nil, ctrl.Result{}, fmt.Errorf("folder %s now resolves to %s", s.resolved.Workspace, f.Path)
	}
	created, err := r.Engine.RunContainer(ctx, want)
	if err != nil {
		return nil, ctrl.Result{}, err
	}
	if err := r.verifyFolderMount(ctx, s, created, f); err != nil {
		return nil, ctrl.Result{RequeueAfter: writes.ConflictRetry}, r.dropMismatch(ctx, s, created, err)
	}
	return created, ctrl.Result{}, nil
}

// errMountMismatch is what verifyFolderMount found wrong.
var errMountMismatch = errors.New("the engine mounted something else at /workspace")

// verifyFolderMount checks, once the container runs, that /workspace is
// the directory f: the engine reports a bind of f's path there and only
// there; that path, walked again without following links, is still f (a
// link swapped in and left is found); and, when the controller can see the
// container's processes (a local engine in its PID namespace), the mount
// itself, through /proc/<pid>/root, is f's device and inode: this also
// catches a swap that was undone after the engine bound the path. Nothing
// is asked of the container itself: its workload could lie.
func (r *Reconciler) verifyFolderMount(ctx context.Context, s *sandboxScope, c *docker.Container, f sandboxspec.Folder) error {
	var at []docker.MountPoint
	for _, m := range c.Mounts {
		if m.Destination == sandboxspec.WorkspacePath {
			at = append(at, m)
		}
	}
	if len(c.Mounts) != 1 || len(at) != 1 || at[0].Type != docker.MountBind || at[0].Source != f.Path {
		return fmt.Errorf("%w: the engine reports %+v, not a bind of %s", errMountMismatch, c.Mounts, f.Path)
	}
	again, err := sandboxspec.ResolveFolder(s.sbx.Spec.Workspace.HostPath, s.sbx.Namespace, r.Config.Workspaces())
	if err != nil {
		return fmt.Errorf("%w: %s cannot be walked again: %w", errMountMismatch, f.Path, err)
	}
	if !again.Same(f.Dev, f.Ino) {
		return fmt.Errorf("%w: %s is now another directory", errMountMismatch, f.Path)
	}
	dev, ino, seen := mountedWorkspace(c)
	if !seen {
		logf.FromContext(ctx).V(1).Info("The container's processes are not visible: its mount is checked through the engine and the path only", "container", c.Name)
		return nil
	}
	if !f.Same(dev, ino) {
		return fmt.Errorf("%w: /workspace in the container is device %d inode %d, the folder %s is device %d inode %d",
			errMountMismatch, dev, ino, f.Path, f.Dev, f.Ino)
	}
	return nil
}

// mountedWorkspace stats /workspace in the running container's mount
// namespace from the host, through /proc/<pid>/root, without following a
// link. It reports nothing when that process is not visible as the
// container's (another PID namespace, the process gone) or cannot be
// looked into (no permission).
func mountedWorkspace(c *docker.Container) (dev, ino uint64, ok bool) {
	if c.Pid <= 0 || c.ID == "" {
		return 0, 0, false
	}
	cgroup := fmt.Sprintf("/proc/%d/cgroup", c.Pid)
	belongs := func() bool {
		b, err := os.ReadFile(cgroup)
		return err == nil && bytes.Contains(b, []byte(c.ID))
	}
	if !belongs() {
		return 0, 0, false
	}
	var st unix.Stat_t
	if err := unix.Lstat(fmt.Sprintf("/proc/%d/root%s", c.Pid, sandboxspec.WorkspacePath), &st); err != nil {
		return 0, 0, false
	}
	// The process may have ended and its PID been reused meanwhile.
	if !belongs() {
		return 0, 0, false
	}
	return st.Dev, st.Ino, true
}

// dropMismatch removes a container whose mount failed verification, at
// once, and reports it.
func (r *Reconciler) dropMismatch(ctx context.Context, s *sandboxScope, c *docker.Container, cause error) error {
	logf.FromContext(ctx).Error(cause, "Folder workspace mount verification failed; removing the container", "container", c.Name)
	if s.id.Owns(c.Labels) {
		if err := r.Engine.RemoveContainer(ctx, c.ID); err != nil {
			return errors.Join(cause, err)
		}
	}
	s.sbx.Status.ContainerID = ""
	if !errors.Is(cause, errMountMismatch) {
		return cause
	}
	msg := "What the engine mounted at /workspace is not the folder the controller checked; the container was removed: " + cause.Error()
	writes.SetCondition(s.sbx, afev1.WorkspaceReadyCondition, false, afev1.WorkspaceMountMismatchReason, msg)
	writes.SetCondition(s.sbx, afev1.ContainerReadyCondition, false, afev1.WorkspaceMountMismatchReason, "The container was removed: its /workspace was not the checked folder")
	r.Recorder.Eventf(s.sbx, nil, corev1.EventTypeWarning, afev1.WorkspaceMountMismatchReason, "Remove", "Removed container %s: %s", c.Name, cause.Error())
	return nil
}

// folderNeighbours maps a Folder Sandbox to the other Sandboxes of its
// namespace whose folders conflict with its own, so that both sides of a
// conflict are reconciled when either appears, changes or goes.
func (r *Reconciler) folderNeighbours(ctx context.Context, obj client.Object) []reconcile.Request {
	sbx, ok := obj.(*afev1.Sandbox)
	if !ok || sbx.Spec.Workspace.Type != afev1.WorkspaceFolder {
		return nil
	}
	opts := r.Config.Workspaces()
	path, _, err := sandboxspec.FolderPath(sbx.Spec.Workspace.HostPath, opts)
	if err != nil {
		return nil
	}
	list := &afev1.SandboxList{}
	if err := r.List(ctx, list, client.InNamespace(sbx.Namespace)); err != nil {
		logf.FromContext(ctx).Error(err, "List the Sandboxes beside a Folder workspace")
		return nil
	}
	ticket := sandboxspec.IdentityOf(sbx, r.Config.Instance).Ticket
	var out []reconcile.Request
	for i := range list.Items {
		other := &list.Items[i]
		if other.Name == sbx.Name || other.Spec.Workspace.Type != afev1.WorkspaceFolder {
			continue
		}
		p, _, err := sandboxspec.FolderPath(other.Spec.Workspace.HostPath, opts)
		if err == nil && sandboxspec.FoldersConflict(path, ticket, p, sandboxspec.IdentityOf(other, r.Config.Instance).Ticket) {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: other.Namespace, Name: other.Name}})
		}
	}
	return out
}

// folderChanged passes the events of Folder Sandboxes that can start or end
// a conflict: creation, deletion, spec changes, the finalizer's removal,
// and a status that names another container (statusForgeable with no
// record of the controller's own writes: every container change counts).
func folderChanged() predicate.Predicate {
	isFolder := func(o client.Object) bool {
		s, ok := o.(*afev1.Sandbox)
		return ok && s.Spec.Workspace.Type == afev1.WorkspaceFolder
	}
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool { return isFolder(e.Object) },
		DeleteFunc: func(e event.DeleteEvent) bool { return isFolder(e.Object) },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return (isFolder(e.ObjectOld) || isFolder(e.ObjectNew)) && writes.SpecOrDeletionChanged(statusForgeable(nil)).Update(e)
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}
