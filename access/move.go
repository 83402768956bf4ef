package access

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/controllers/shared"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/naming"
	"afe.dev/sandbox/internal/runlog"
	"afe.dev/sandbox/internal/sandboxspec"
)

// A ticket moved off a drained node (per-node mode, NodeDrained) takes its
// sandboxes' workspaces and Run logs along over the peer listener, manager
// to manager, with no caller behind the request:
//
//	GET /afe-peer/v1/namespaces/NS/sandboxes/NAME/workspace?uid=UID
//	GET /afe-peer/v1/namespaces/NS/sandboxes/NAME/runlogs?uid=UID
//	GET /afe-peer/v1/namespaces/NS/sandboxes/NAME/holds?uid=UID
//	GET /afe-peer/v1/namespaces/NS/sandboxes/NAME/snapshots?uid=UID
//	GET /afe-peer/v1/namespaces/NS/sandboxes/NAME/snapshot?uid=UID&volume=V
//
// The asking manager is the node of its client certificate (the managers'
// CA). A workspace or Run logs go only to the manager of the node the
// sandbox's ticket is placed on now (its placeholder Pod's, never a status
// field), and only for the Sandbox of that UID; the container whose
// workspace is sent is the sandbox's own by its derived name and labels,
// and is stopped first. holds answers any manager whether this one runs
// the sandbox of that UID: the node it left asks it before removing its
// own copy. A ticket made afresh after its node was lost (NodeLost) asks
// every manager for the snapshots it keeps of the ticket under the
// sandbox's name, and restores the newest: a manager lists and sends only
// snapshot volumes of its own instance whose labels name that namespace,
// sandbox name and the UID of the Ticket that controls the Sandbox, and
// only to the manager of the node that ticket is placed on now.

// holdsTimeout bounds a holds request.
const holdsTimeout = 10 * time.Second

// movePrefix starts the move routes.
const movePrefix = "/afe-peer/v1/namespaces/"

// The headers of a workspace sent: the owner of its files there, and, as
// trailers, the size and SHA-256 of the tar as it was sent.
const (
	workspaceUserHeader    = "Afe-Workspace-User"
	workspaceSizeTrailer   = "Afe-Workspace-Size"
	workspaceSHA256Trailer = "Afe-Workspace-Sha256"
)

// moveRequest is a move route's request.
type moveRequest struct {
	namespace, name, what string
	uid                   types.UID
}

// parseMove reads a move route's path; false for any other path.
func parseMove(r *http.Request) (moveRequest, bool) {
	rest, ok := strings.CutPrefix(r.URL.Path, movePrefix)
	parts := strings.Split(rest, "/")
	if !ok || len(parts) != 4 || parts[1] != "sandboxes" || parts[0] == "" || parts[2] == "" {
		return moveRequest{}, false
	}
	return moveRequest{namespace: parts[0], name: parts[2], what: parts[3], uid: types.UID(r.URL.Query().Get("uid"))}, true
}

// serveMove serves a move route to the manager of node from.
func (s *Server) serveMove(w http.ResponseWriter, r *http.Request, from string) {
	req, ok := parseMove(r)
	if !ok || r.Method != http.MethodGet || req.uid == "" {
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, "", "no such move route")
		return
	}
	ctx := r.Context()
	sbx := &afev1.Sandbox{}
	err := s.reader.Get(ctx, types.NamespacedName{Namespace: req.namespace, Name: req.name}, sbx)
	if client.IgnoreNotFound(err) != nil {
		writeError(w, err)
		return
	}
	if err != nil || sbx.UID != req.uid || !sbx.DeletionTimestamp.IsZero() {
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, "", fmt.Sprintf("no sandbox %s/%s of UID %s", req.namespace, req.name, req.uid))
		return
	}
	if req.what == "holds" {
		s.serveHolds(w, r, sbx)
		return
	}
	node, err := s.placedNode(ctx, req.namespace, req.name)
	if err != nil || node != from {
		s.log.Info("Refused a move to a manager whose node the sandbox is not placed on", "node", from, "namespace", req.namespace, "sandbox", req.name)
		writeStatus(w, http.StatusForbidden, metav1.StatusReasonForbidden, "",
			fmt.Sprintf("sandbox %s/%s is not placed on node %s", req.namespace, req.name, from))
		return
	}
	switch req.what {
	case "workspace":
		s.serveMoveWorkspace(w, r, sbx, from)
	case "runlogs":
		s.serveMoveRunLogs(w, r, sbx)
	case "snapshots":
		s.serveSnapshots(w, r, sbx)
	case "snapshot":
		s.serveSnapshot(w, r, sbx, from)
	default:
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, "", "no such move route")
	}
}

// heldContainer is this engine's container of the sandbox, verified as
// containerFor verifies it, running or not; nil when there is none.
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

// serveHolds answers whether this manager holds the sandbox: its
// container runs here, or a workspace moved here arrived whole (the record
// controllers/sandbox writes once it verified it).
func (s *Server) serveHolds(w http.ResponseWriter, r *http.Request, sbx *afev1.Sandbox) {
	ctx := r.Context()
	ct, err := s.heldContainer(ctx, sbx)
	if err != nil {
		writeError(w, err)
		return
	}
	holds := ct != nil && ct.Running
	if !holds {
		id := sandboxspec.IdentityOf(sbx, s.opts.Instance)
		v, err := s.engine.InspectVolume(ctx, naming.MoveVerified(id.Key, id.Instance))
		if err != nil && !errors.Is(err, docker.ErrNotFound) {
			writeError(w, err)
			return
		}
		holds = err == nil && id.OwnsAs(v.Labels, afev1.RoleSnapshotCopy)
	}
	writeJSON(w, http.StatusOK, map[string]bool{"holds": holds})
}

// serveMoveWorkspace stops the sandbox's container and sends its
// workspace volume's tree.
func (s *Server) serveMoveWorkspace(w http.ResponseWriter, r *http.Request, sbx *afev1.Sandbox, to string) {
	ctx := r.Context()
	ct, err := s.heldContainer(ctx, sbx)
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
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, "", fmt.Sprintf("no workspace volume of sandbox %s/%s on this node", sbx.Namespace, sbx.Name))
		return
	}
	uid, gid, err := sandboxspec.ContainerUser(sbx.Spec.User, ct)
	if err != nil {
		writeError(w, err)
		return
	}
	// Nothing writes to the workspace while it is read.
	if err := s.engine.StopContainer(ctx, ct.ID); err != nil {
		writeError(w, err)
		return
	}
	id := sandboxspec.IdentityOf(sbx, s.opts.Instance)
	s.log.Info("Sending a workspace to the node its ticket moved to", "node", to, "namespace", sbx.Namespace, "sandbox", sbx.Name, "volume", volume)
	s.sendTree(w, r, naming.Move(id.Key)+"-out", id.Labels(afev1.RoleSnapshotCopy), volume, fmt.Sprintf("%d:%d", uid, gid))
}

// sendTree streams the tree of the volume, read through a helper of that
// name and labels, with the owner of its files there (user, empty when
// not known) and, as trailers, the tar's size and SHA-256.
func (s *Server) sendTree(w http.ResponseWriter, r *http.Request, helper string, labels map[string]string, volume, user string) {
	tree, err := s.engine.ExportWorkspace(r.Context(), helper, labels, docker.Mount{Type: docker.MountVolume, Source: volume})
	if err != nil {
		writeError(w, err)
		return
	}
	defer func() { _ = tree.Close() }()
	w.Header().Set("Content-Type", "application/x-tar")
	if user != "" {
		w.Header().Set(workspaceUserHeader, user)
	}
	w.Header().Set("Trailer", workspaceSizeTrailer+", "+workspaceSHA256Trailer)
	w.WriteHeader(http.StatusOK)
	sum := sha256.New()
	n, err := io.Copy(io.MultiWriter(w, sum), tree)
	if err != nil {
		// No trailers: the receiver refuses what it read.
		s.log.Info("A volume's tree was not sent whole", "volume", volume, "error", err.Error())
		return
	}
	w.Header().Set(workspaceSizeTrailer, strconv.FormatInt(n, 10))
	w.Header().Set(workspaceSHA256Trailer, hex.EncodeToString(sum.Sum(nil)))
}

// ticketSnapshots are the snapshot volumes of this manager's instance that
// the Sandbox's ticket keeps under its name: the labels of each name the
// namespace, the sandbox's name and the UID of the Ticket that controls
// the Sandbox (verified by placedNode before any route reads them).
func (s *Server) ticketSnapshots(ctx context.Context, sbx *afev1.Sandbox) ([]docker.Volume, error) {
	ref := metav1.GetControllerOf(sbx)
	if ref == nil || ref.UID == "" {
		return nil, nil
	}
	return s.engine.ListVolumes(ctx, map[string]string{
		afev1.LabelController: s.opts.Instance,
		afev1.LabelRole:       afev1.RoleSnapshot,
		afev1.LabelNamespace:  sbx.Namespace,
		afev1.LabelSandbox:    sbx.Name,
		afev1.LabelTicketUID:  string(ref.UID),
	})
}

// peerSnapshot is a snapshot volume as the snapshots route lists it.
type peerSnapshot struct {
	Volume  string    `json:"volume"`
	Created time.Time `json:"created"`
}

// serveSnapshots lists the snapshot volumes the sandbox's ticket keeps
// here under its name.
func (s *Server) serveSnapshots(w http.ResponseWriter, r *http.Request, sbx *afev1.Sandbox) {
	vols, err := s.ticketSnapshots(r.Context(), sbx)
	if err != nil {
		writeError(w, err)
		return
	}
	out := struct {
		Snapshots []peerSnapshot `json:"snapshots"`
	}{Snapshots: []peerSnapshot{}}
	for _, v := range vols {
		out.Snapshots = append(out.Snapshots, peerSnapshot{Volume: v.Name, Created: v.Created})
	}
	writeJSON(w, http.StatusOK, out)
}

// serveSnapshot sends one of them, found again by its labels (a name
// alone is no snapshot of the ticket's).
func (s *Server) serveSnapshot(w http.ResponseWriter, r *http.Request, sbx *afev1.Sandbox, to string) {
	want := r.URL.Query().Get("volume")
	vols, err := s.ticketSnapshots(r.Context(), sbx)
	if err != nil {
		writeError(w, err)
		return
	}
	for _, v := range vols {
		if v.Name != want || want == "" {
			continue
		}
		s.log.Info("Sending a snapshot to the node its ticket is placed on", "node", to, "namespace", sbx.Namespace, "sandbox", sbx.Name, "volume", v.Name)
		id := sandboxspec.IdentityOf(sbx, s.opts.Instance)
		s.sendTree(w, r, naming.SnapshotSend(v.Name), id.Labels(afev1.RoleSnapshotCopy), v.Name, v.Labels[afev1.LabelUser])
		return
	}
	writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, "",
		fmt.Sprintf("no snapshot %s of the ticket of sandbox %s/%s on this node", want, sbx.Namespace, sbx.Name))
}

// serveMoveRunLogs sends the logs this manager keeps of the sandbox's Runs.
func (s *Server) serveMoveRunLogs(w http.ResponseWriter, r *http.Request, sbx *afev1.Sandbox) {
	runs := &afev1.RunList{}
	if err := s.reader.List(r.Context(), runs, client.InNamespace(sbx.Namespace)); err != nil {
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
	store := s.opts.RunLogs
	if store == nil {
		store = &runlog.Store{}
		uids = nil
	}
	if err := store.Export(w, uids); err != nil {
		s.log.Info("Run logs were not sent whole", "namespace", sbx.Namespace, "sandbox", sbx.Name, "error", err.Error())
	}
}

// Moves is the asking side of a move (shared.Mover): the manager of the
// node a ticket is placed on now asks the node's manager it left, over
// the peer listener of the Server it is attached to.
type Moves struct {
	// Store is where the Run logs moved here are kept (nil: none are).
	Store *runlog.Store

	mu     sync.Mutex
	server *Server
}

var _ shared.Mover = (*Moves)(nil)

// Attach has the moves go through the server's peer channel; before it,
// every move waits (ErrMoveUnavailable).
func (m *Moves) Attach(s *Server) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.server = s
}

// get asks node's manager for what of the sandbox, with the query's
// values beside its UID; the answer is 200.
func (m *Moves) get(ctx context.Context, node string, sbx *afev1.Sandbox, what string, query url.Values) (*http.Response, error) {
	m.mu.Lock()
	s := m.server
	m.mu.Unlock()
	if s == nil || s.peer == nil {
		return nil, fmt.Errorf("%w: the peer channel is not up yet", shared.ErrMoveUnavailable)
	}
	pr, err := s.peer.peers.lookup(ctx, node)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: %w", shared.ErrMoveUnavailable, err)
	case pr.renewed.IsZero():
		// No manager ever ran there: nothing can come from it.
		return nil, fmt.Errorf("%w: no manager of node %s ever registered", shared.ErrNothingToMove, node)
	case !pr.live:
		return nil, fmt.Errorf("%w: %s", shared.ErrMoveUnavailable, pr.gone())
	}
	u := url.URL{Scheme: "https", Host: pr.address,
		Path: movePrefix + url.PathEscape(sbx.Namespace) + "/sandboxes/" + url.PathEscape(sbx.Name) + "/" + what, RawQuery: withUID(query, sbx.UID).Encode()}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := (&http.Client{Transport: s.peer.transport(node)}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: node %s: %w", shared.ErrMoveUnavailable, node, err)
	}
	if resp.StatusCode == http.StatusOK {
		return resp, nil
	}
	defer func() { _ = resp.Body.Close() }()
	msg := statusMessage(resp)
	switch resp.StatusCode {
	case http.StatusNotFound:
		return nil, fmt.Errorf("%w: node %s: %s", shared.ErrNothingToMove, node, msg)
	case http.StatusServiceUnavailable:
		return nil, fmt.Errorf("%w: node %s: %s", shared.ErrMoveUnavailable, node, msg)
	}
	return nil, fmt.Errorf("node %s answered %s: %s", node, resp.Status, msg)
}

// withUID is the query with the sandbox's UID.
func withUID(query url.Values, uid types.UID) url.Values {
	q := url.Values{}
	for k, v := range query {
		q[k] = v
	}
	q.Set("uid", string(uid))
	return q
}

// statusMessage is the message of an error answer.
func statusMessage(resp *http.Response) string {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	st := metav1.Status{}
	if json.Unmarshal(body, &st) == nil && st.Message != "" {
		return st.Message
	}
	return strings.TrimSpace(string(body))
}

// Workspace implements shared.Mover.
func (m *Moves) Workspace(ctx context.Context, node string, sbx *afev1.Sandbox) (*shared.MovedWorkspace, error) {
	resp, err := m.get(ctx, node, sbx, "workspace", nil)
	if err != nil {
		return nil, err
	}
	return treeOf(resp, node), nil
}

// Snapshot implements shared.Mover.
func (m *Moves) Snapshot(ctx context.Context, node string, sbx *afev1.Sandbox, volume string) (*shared.MovedWorkspace, error) {
	resp, err := m.get(ctx, node, sbx, "snapshot", url.Values{"volume": {volume}})
	if err != nil {
		return nil, err
	}
	return treeOf(resp, node), nil
}

// snapshotsTimeout bounds each manager's answer to a snapshots request.
const snapshotsTimeout = 5 * time.Second

// Snapshots implements shared.Mover.
func (m *Moves) Snapshots(ctx context.Context, sbx *afev1.Sandbox) ([]shared.PeerSnapshot, error) {
	m.mu.Lock()
	s := m.server
	m.mu.Unlock()
	if s == nil || s.peer == nil {
		return nil, fmt.Errorf("%w: the peer channel is not up yet", shared.ErrMoveUnavailable)
	}
	peers, err := s.peer.peers.list(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", shared.ErrMoveUnavailable, err)
	}
	var found []shared.PeerSnapshot
	var errs []error
	for _, pr := range peers {
		if !pr.live {
			continue // a lost node's engine is out of reach
		}
		got, err := m.snapshotsOf(ctx, pr.node, sbx)
		if err != nil {
			errs = append(errs, err)
		}
		found = append(found, got...)
	}
	return found, errors.Join(errs...)
}

// snapshotsOf asks node's manager for the snapshots of the sandbox's
// ticket it keeps.
func (m *Moves) snapshotsOf(ctx context.Context, node string, sbx *afev1.Sandbox) ([]shared.PeerSnapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, snapshotsTimeout)
	defer cancel()
	resp, err := m.get(ctx, node, sbx, "snapshots", nil)
	if errors.Is(err, shared.ErrNothingToMove) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	var answer struct {
		Snapshots []peerSnapshot `json:"snapshots"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&answer); err != nil {
		return nil, fmt.Errorf("node %s: %w", node, err)
	}
	out := make([]shared.PeerSnapshot, 0, len(answer.Snapshots))
	for _, s := range answer.Snapshots {
		out = append(out, shared.PeerSnapshot{Node: node, Volume: s.Volume, Created: s.Created})
	}
	return out, nil
}

// treeOf reads a tree sent by sendTree.
func treeOf(resp *http.Response, node string) *shared.MovedWorkspace {
	counted := &countingReader{r: resp.Body, sum: sha256.New()}
	return &shared.MovedWorkspace{
		Tree: struct {
			io.Reader
			io.Closer
		}{counted, resp.Body},
		User: resp.Header.Get(workspaceUserHeader),
		Verify: func() error {
			size, sum := resp.Trailer.Get(workspaceSizeTrailer), resp.Trailer.Get(workspaceSHA256Trailer)
			got := hex.EncodeToString(counted.sum.Sum(nil))
			if size == "" || sum == "" {
				return fmt.Errorf("the workspace from node %s ended before its manager had sent it whole", node)
			}
			if size != strconv.FormatInt(counted.n, 10) || sum != got {
				return fmt.Errorf("the workspace from node %s arrived as %d bytes of SHA-256 %s, sent as %s bytes of SHA-256 %s", node, counted.n, got, size, sum)
			}
			return nil
		},
	}
}

// countingReader counts and hashes what is read through it.
type countingReader struct {
	r   io.Reader
	n   int64
	sum hash.Hash
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	c.sum.Write(p[:n])
	return n, err
}

// RunLogs implements shared.Mover.
func (m *Moves) RunLogs(ctx context.Context, node string, sbx *afev1.Sandbox, runs []types.UID) error {
	if m.Store == nil || len(runs) == 0 {
		return nil
	}
	resp, err := m.get(ctx, node, sbx, "runlogs", nil)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	return m.Store.Import(resp.Body, runs)
}

// Live implements shared.Mover.
func (m *Moves) Live(ctx context.Context, node string) bool {
	m.mu.Lock()
	s := m.server
	m.mu.Unlock()
	if s == nil || s.peer == nil {
		return false
	}
	pr, err := s.peer.peers.lookup(ctx, node)
	return err == nil && pr.live
}

// Holds implements shared.Mover.
func (m *Moves) Holds(ctx context.Context, node string, sbx *afev1.Sandbox) (bool, error) {
	// Asked from a reconcile: a manager that does not answer holds no
	// worker.
	ctx, cancel := context.WithTimeout(ctx, holdsTimeout)
	defer cancel()
	resp, err := m.get(ctx, node, sbx, "holds", nil)
	if errors.Is(err, shared.ErrNothingToMove) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer func() { _ = resp.Body.Close() }()
	var answer struct {
		Holds bool `json:"holds"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4<<10)).Decode(&answer); err != nil {
		return false, fmt.Errorf("node %s: %w", node, err)
	}
	return answer.Holds, nil
}
