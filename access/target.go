package access

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	accessv1 "afe.dev/sandbox/api/access/v1alpha1"
	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/naming"
	"afe.dev/sandbox/internal/pool"
	"afe.dev/sandbox/internal/sandboxspec"
)

// target is the container a request acts on, and as whom.
type target struct {
	sbx *afev1.Sandbox
	// containerID names the container inspected and verified, so a
	// container put in its place afterwards is not the one reached.
	containerID string
	// user is the sandbox's uid:gid, numeric.
	user     string
	uid, gid int
	// mounts are the container's, as the engine reports them.
	mounts []docker.MountPoint
	// userSpaceKernel is true when the container runs under gVisor, as
	// the engine reports its runtime.
	userSpaceKernel bool
	// env is the sandbox's declared env, resolved for an exec (resolveEnv).
	env []string
}

// statusError is an error with the HTTP status, the Kubernetes reason and
// the access API's reason (api/access/v1alpha1) it is answered with.
type statusError struct {
	code   int
	reason metav1.StatusReason
	cause  accessv1.Reason
	msg    string
}

func (e *statusError) Error() string { return e.msg }

func conflict(cause accessv1.Reason, format string, args ...any) error {
	return &statusError{http.StatusConflict, metav1.StatusReasonConflict, cause, fmt.Sprintf(format, args...)}
}

// notReady refuses a request to a sandbox with no running container of
// its own.
func notReady(format string, args ...any) error {
	return conflict(accessv1.ReasonSandboxNotReady, format, args...)
}

// writeError answers with err's status, or 500.
func writeError(w http.ResponseWriter, err error) {
	var se *statusError
	if errors.As(err, &se) {
		writeStatus(w, se.code, se.reason, se.cause, se.msg)
		return
	}
	writeStatus(w, http.StatusInternalServerError, metav1.StatusReasonInternalError, "", err.Error())
}

// target finds the sandbox container of the Sandbox of that namespace and
// name, read from the API server (not a cache: a Sandbox deleted and made
// again has another UID).
func (s *Server) target(ctx context.Context, namespace, name string) (*target, error) {
	sbx := &afev1.Sandbox{}
	if err := s.reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, sbx); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &statusError{http.StatusNotFound, metav1.StatusReasonNotFound, accessv1.ReasonSandboxNotFound, fmt.Sprintf("sandboxes.sandbox.afe.dev %q not found", name)}
		}
		return nil, err
	}
	if sbx.DeletionTimestamp != nil {
		return nil, conflict(accessv1.ReasonSandboxDeleting, "sandbox %s is being deleted", name)
	}
	t, err := containerFor(ctx, s.engine, sbx, s.opts.Instance)
	var se *statusError
	if err == nil || sbx.Spec.Suspend || !errors.As(err, &se) || se.code != http.StatusConflict {
		return t, err
	}
	// No running container, and not suspended by its spec: the sandbox may
	// have been suspended by its idle timeout (or be on its way to Ready).
	// Asking for a resume counts as activity and starts it again; the
	// request waits for its container.
	if err := s.requestResume(ctx, sbx); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(resumeWait)
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
		t, err = containerFor(ctx, s.engine, sbx, s.opts.Instance)
		if err == nil || time.Now().After(deadline) {
			return t, err
		}
	}
}

// resumeWait is how long a request waits for a sandbox it resumed.
const resumeWait = 60 * time.Second

// requestResume sets the Sandbox's resume-requested annotation to now.
func (s *Server) requestResume(ctx context.Context, sbx *afev1.Sandbox) error {
	patch, err := json.Marshal(afev1.ResumeRequestPatch(time.Now()))
	if err != nil {
		return fmt.Errorf("resume sandbox %s: %w", sbx.Name, err)
	}
	if err := s.writer.Patch(ctx, sbx.DeepCopy(), client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("resume sandbox %s: %w", sbx.Name, err)
	}
	s.log.Info("Resuming a sandbox for an access request", "namespace", sbx.Namespace, "sandbox", sbx.Name)
	return nil
}

// containerFor is the sandbox container of sbx: its name is derived from
// the Sandbox's namespace and name (internal/naming), never read from
// status, and the container found there must carry the Sandbox's UID,
// namespace and name, the sandbox role and this controller's instance, and
// be running.
func containerFor(ctx context.Context, engine Engine, sbx *afev1.Sandbox, instance string) (*target, error) {
	if sbx.UID == "" {
		return nil, notReady("sandbox %s has no UID", sbx.Name)
	}
	id := sandboxspec.IdentityOf(sbx, instance)
	name := naming.Container(id.Key)
	ct, err := engine.InspectContainer(ctx, name)
	if errors.Is(err, docker.ErrNotFound) {
		return nil, notReady("sandbox %s has no container: wait until it is Ready", sbx.Name)
	}
	if err != nil {
		return nil, err
	}
	k, err := differs(ctx, engine, id, ct)
	if err != nil {
		return nil, err
	}
	if k != "" {
		return nil, notReady("container %s is not the sandbox container of sandbox %s (label %s differs): wait until it is Ready", name, sbx.Name, k)
	}
	// The sandbox's user, or the id allocated to it, as its container
	// carries it.
	uid, gid, err := sandboxspec.ContainerUser(sbx.Spec.User, ct)
	if err != nil {
		return nil, notReady("sandbox %s: %v", sbx.Name, err)
	}
	if !ct.Running {
		return nil, notReady("the container of sandbox %s is not running: wait until it is Ready", sbx.Name)
	}
	t := &target{sbx: sbx, containerID: ct.ID, user: fmt.Sprintf("%d:%d", uid, gid), uid: uid, gid: gid, mounts: ct.Mounts}
	if ct.Runtime != "" {
		rt, err := engine.Runtime(ctx, ct.Runtime)
		if err != nil {
			return nil, fmt.Errorf("the runtime of sandbox %s: %w", sbx.Name, err)
		}
		t.userSpaceKernel = rt.UserSpaceKernel()
	}
	return t, nil
}

// differs is the first label in which the container differs from the
// sandbox container's; empty when it is the sandbox's, or the pool member
// its claim record binds to it (the record's labels and the member's
// verified as internal/pool.Binds says, never a status field).
// heldContainer is this engine's container of the sandbox, verified as
// containerFor verifies it, running or not; nil when there is none (the
// move protocol's Handler.Held).
func (s *Server) heldContainer(ctx context.Context, sbx *afev1.Sandbox) (*docker.Container, error) {
	id := sandboxspec.IdentityOf(sbx, s.opts.Instance)
	ct, err := s.engine.InspectContainer(ctx, naming.Container(id.Key))
	if errors.Is(err, docker.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	k, err := differs(ctx, s.engine, id, ct)
	if err != nil || k != "" {
		return nil, err
	}
	return ct, nil
}

func differs(ctx context.Context, engine Engine, id sandboxspec.Identity, ct *docker.Container) (string, error) {
	k := id.Differs(ct.Labels, afev1.RoleSandbox)
	if k == "" || ct.Labels[afev1.LabelRole] != afev1.RoleMember {
		return k, nil
	}
	v, err := engine.InspectVolume(ctx, naming.Claim(id.Key))
	if errors.Is(err, docker.ErrNotFound) {
		return k, nil
	}
	if err != nil {
		return k, err
	}
	if pool.Binds(id, v.Labels, ct) {
		return "", nil
	}
	return k, nil
}
