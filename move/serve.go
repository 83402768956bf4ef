package move

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/naming"
	"afe.dev/sandbox/internal/runlog"
	"afe.dev/sandbox/internal/sandboxspec"
)

// prefix starts the move routes.
const prefix = "/afe-peer/v1/namespaces/"

// IsRoute is true for the path of a move route: the peer listener gives
// those to a Handler.
func IsRoute(path string) bool { return strings.HasPrefix(path, prefix) }

// Engine is what serving a move needs of the Docker engine.
type Engine interface {
	// InspectVolume reads the record of a workspace moved here whole.
	InspectVolume(ctx context.Context, name string) (*docker.Volume, error)
	// StopContainer and ExportWorkspace send a moved ticket's workspace.
	StopContainer(ctx context.Context, name string) error
	ExportWorkspace(ctx context.Context, name string, labels map[string]string, m docker.Mount) (io.ReadCloser, error)
	// ListVolumes finds the snapshots of a ticket made afresh after its
	// node was lost.
	ListVolumes(ctx context.Context, labels map[string]string) ([]docker.Volume, error)
}

// Handler serves the move routes to the other managers.
type Handler struct {
	// Reader reads Sandboxes and Runs from the API server (a Sandbox
	// deleted and made again has another UID).
	Reader client.Reader
	Engine Engine
	// Instance is the controller's --instance.
	Instance string
	// RunLogs are the Run logs this manager keeps (nil: none).
	RunLogs *runlog.Store
	// Placed is the node the sandbox of that namespace and name is placed
	// on: its Ticket's placeholder Pod's, as the access API routes it.
	Placed func(ctx context.Context, namespace, name string) (string, error)
	// Held is this engine's container of the sandbox, verified as the
	// access API verifies the container it reaches, running or not; nil
	// when there is none.
	Held func(ctx context.Context, sbx *afev1.Sandbox) (*docker.Container, error)
	Log  logr.Logger
}

// request is a move route's request.
type request struct {
	namespace, name, what string
	uid                   types.UID
}

// parse reads a move route's path; false for any other path.
func parse(r *http.Request) (request, bool) {
	rest, ok := strings.CutPrefix(r.URL.Path, prefix)
	parts := strings.Split(rest, "/")
	if !ok || len(parts) != 4 || parts[1] != "sandboxes" || parts[0] == "" || parts[2] == "" {
		return request{}, false
	}
	return request{namespace: parts[0], name: parts[2], what: parts[3], uid: types.UID(r.URL.Query().Get("uid"))}, true
}

// Serve serves a move route to the manager of node from, whose client
// certificate the peer listener verified.
func (h *Handler) Serve(w http.ResponseWriter, r *http.Request, from string) {
	req, ok := parse(r)
	if !ok || r.Method != http.MethodGet || req.uid == "" {
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, "no such move route")
		return
	}
	ctx := r.Context()
	sbx := &afev1.Sandbox{}
	err := h.Reader.Get(ctx, types.NamespacedName{Namespace: req.namespace, Name: req.name}, sbx)
	if client.IgnoreNotFound(err) != nil {
		writeError(w, err)
		return
	}
	if err != nil || sbx.UID != req.uid || !sbx.DeletionTimestamp.IsZero() {
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("no sandbox %s/%s of UID %s", req.namespace, req.name, req.uid))
		return
	}
	if req.what == "holds" {
		h.serveHolds(w, r, sbx)
		return
	}
	node, err := h.Placed(ctx, req.namespace, req.name)
	if err != nil || node != from {
		h.Log.Info("Refused a move to a manager whose node the sandbox is not placed on", "node", from, "namespace", req.namespace, "sandbox", req.name)
		writeStatus(w, http.StatusForbidden, metav1.StatusReasonForbidden, fmt.Sprintf("sandbox %s/%s is not placed on node %s", req.namespace, req.name, from))
		return
	}
	switch req.what {
	case "workspace":
		h.serveWorkspace(w, r, sbx, from)
	case "runlogs":
		h.serveRunLogs(w, r, sbx)
	case "snapshots":
		h.serveSnapshots(w, r, sbx)
	case "snapshot":
		h.serveSnapshot(w, r, sbx, from)
	default:
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, "no such move route")
	}
}

// serveHolds answers whether this manager holds the sandbox: its
// container runs here, or a workspace moved here arrived whole (the record
// controllers/sandbox writes once it verified it).
func (h *Handler) serveHolds(w http.ResponseWriter, r *http.Request, sbx *afev1.Sandbox) {
	ctx := r.Context()
	ct, err := h.Held(ctx, sbx)
	if err != nil {
		writeError(w, err)
		return
	}
	holds := ct != nil && ct.Running
	if !holds {
		id := sandboxspec.IdentityOf(sbx, h.Instance)
		v, err := h.Engine.InspectVolume(ctx, naming.MoveVerified(id.Key, id.Instance))
		if err != nil && !errors.Is(err, docker.ErrNotFound) {
			writeError(w, err)
			return
		}
		holds = err == nil && id.OwnsAs(v.Labels, afev1.RoleSnapshotCopy)
	}
	writeJSON(w, http.StatusOK, map[string]bool{"holds": holds})
}

// serveWorkspace stops the sandbox's container and sends its workspace
// volume's tree.
func (h *Handler) serveWorkspace(w http.ResponseWriter, r *http.Request, sbx *afev1.Sandbox, to string) {
	ctx := r.Context()
	ct, err := h.Held(ctx, sbx)
	if err != nil {
		writeError(w, err)
		return
	}
	var volume string
	if ct != nil {
		for _, m := range ct.Mounts {
			if m.Destination == sandboxspec.WorkspacePath && m.Type == docker.MountVolume {
				volume = m.Name
			}
		}
	}
	if volume == "" {
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("no workspace volume of sandbox %s/%s on this node", sbx.Namespace, sbx.Name))
		return
	}
	uid, gid, err := sandboxspec.ContainerUser(sbx.Spec.User, ct)
	if err != nil {
		writeError(w, err)
		return
	}
	// Nothing writes to the workspace while it is read.
	if err := h.Engine.StopContainer(ctx, ct.ID); err != nil {
		writeError(w, err)
		return
	}
	id := sandboxspec.IdentityOf(sbx, h.Instance)
	h.Log.Info("Sending a workspace to the node its ticket moved to", "node", to, "namespace", sbx.Namespace, "sandbox", sbx.Name, "volume", volume)
	h.sendTree(w, r, naming.Move(id.Key)+"-out", id.Labels(afev1.RoleSnapshotCopy), volume, fmt.Sprintf("%d:%d", uid, gid))
}

// ticketSnapshots are the snapshot volumes of this manager's instance that
// the Sandbox's ticket keeps under its name: the labels of each name the
// namespace, the sandbox's name and the UID of the Ticket that controls
// the Sandbox (verified by Placed before any route reads them).
func (h *Handler) ticketSnapshots(ctx context.Context, sbx *afev1.Sandbox) ([]docker.Volume, error) {
	ref := metav1.GetControllerOf(sbx)
	if ref == nil || ref.UID == "" {
		return nil, nil
	}
	return h.Engine.ListVolumes(ctx, map[string]string{
		afev1.LabelController: h.Instance,
		afev1.LabelRole:       afev1.RoleSnapshot,
		afev1.LabelNamespace:  sbx.Namespace,
		afev1.LabelSandbox:    sbx.Name,
		afev1.LabelTicketUID:  string(ref.UID),
	})
}

// listedSnapshot is a snapshot volume as the snapshots route lists it.
type listedSnapshot struct {
	Volume  string    `json:"volume"`
	Created time.Time `json:"created"`
}

// serveSnapshots lists the snapshot volumes the sandbox's ticket keeps
// here under its name.
func (h *Handler) serveSnapshots(w http.ResponseWriter, r *http.Request, sbx *afev1.Sandbox) {
	vols, err := h.ticketSnapshots(r.Context(), sbx)
	if err != nil {
		writeError(w, err)
		return
	}
	out := struct {
		Snapshots []listedSnapshot `json:"snapshots"`
	}{Snapshots: []listedSnapshot{}}
	for _, v := range vols {
		out.Snapshots = append(out.Snapshots, listedSnapshot{Volume: v.Name, Created: v.Created})
	}
	writeJSON(w, http.StatusOK, out)
}

// serveSnapshot sends one of them, found again by its labels (a name
// alone is no snapshot of the ticket's).
func (h *Handler) serveSnapshot(w http.ResponseWriter, r *http.Request, sbx *afev1.Sandbox, to string) {
	want := r.URL.Query().Get("volume")
	vols, err := h.ticketSnapshots(r.Context(), sbx)
	if err != nil {
		writeError(w, err)
		return
	}
	for _, v := range vols {
		if v.Name != want || want == "" {
			continue
		}
		h.Log.Info("Sending a snapshot to the node its ticket is placed on", "node", to, "namespace", sbx.Namespace, "sandbox", sbx.Name, "volume", v.Name)
		id := sandboxspec.IdentityOf(sbx, h.Instance)
		h.sendTree(w, r, naming.SnapshotSend(v.Name), id.Labels(afev1.RoleSnapshotCopy), v.Name, v.Labels[afev1.LabelUser])
		return
	}
	writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound,
		fmt.Sprintf("no snapshot %s of the ticket of sandbox %s/%s on this node", want, sbx.Namespace, sbx.Name))
}

// serveRunLogs sends the logs this manager keeps of the sandbox's Runs.
func (h *Handler) serveRunLogs(w http.ResponseWriter, r *http.Request, sbx *afev1.Sandbox) {
	runs := &afev1.RunList{}
	if err := h.Reader.List(r.Context(), runs, client.InNamespace(sbx.Namespace)); err != nil {
		writeError(w, err)
		return
	}
	var uids []types.UID
	for i := range runs.Items {
		if runs.Items[i].Spec.SandboxRef.Name == sbx.Name {
			uids = append(uids, runs.Items[i].UID)
		}
	}
	w.Header().Set("Content-Type", "application/x-tar")
	w.WriteHeader(http.StatusOK)
	store := h.RunLogs
	if store == nil {
		store = &runlog.Store{}
		uids = nil
	}
	if err := store.Export(w, uids); err != nil {
		h.Log.Info("Run logs were not sent whole", "namespace", sbx.Namespace, "sandbox", sbx.Name, "error", err.Error())
	}
}

// writeError answers a failure of the engine or the API server: 500.
func writeError(w http.ResponseWriter, err error) {
	writeStatus(w, http.StatusInternalServerError, metav1.StatusReasonInternalError, err.Error())
}

// writeStatus answers with a Status, as the Kubernetes API does (the
// asking side reads its message: statusMessage).
func writeStatus(w http.ResponseWriter, code int, reason metav1.StatusReason, message string) {
	writeJSON(w, code, metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure,
		Message:  message,
		Reason:   reason,
		Code:     int32(code),
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
