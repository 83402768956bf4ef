package move

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/runlog"
)

// holdsTimeout bounds a holds request.
const holdsTimeout = 10 * time.Second

// snapshotsTimeout bounds each manager's answer to a snapshots request.
const snapshotsTimeout = 5 * time.Second

// Peers is the channel between the managers that the moves go through:
// the access API's peer listener and the register of the managers
// (access.Server.MovePeers).
type Peers interface {
	// Peer is node's manager as the register tells it.
	Peer(ctx context.Context, node string) (Peer, error)
	// Others are every other manager that ever registered.
	Others(ctx context.Context) ([]Peer, error)
	// Transport reaches node's manager: this manager's certificate, and
	// only node's accepted.
	Transport(node string) http.RoundTripper
}

// Peer is a node's manager.
type Peer struct {
	Node, Address string
	// Registered is false when no manager of the node ever registered.
	Registered bool
	// Live is true when it runs and answers the others; Gone says why
	// not, when it does not.
	Live bool
	Gone string
}

// Client is the asking side of a move (Mover): the manager of the node a
// ticket is placed on now asks the node's manager it left, over the peer
// channel it is attached to.
type Client struct {
	// Store is where the Run logs moved here are kept (nil: none are).
	Store *runlog.Store

	mu    sync.Mutex
	peers Peers
}

var _ Mover = (*Client)(nil)

// Attach has the moves go through the peer channel; before it, every
// move waits (ErrUnavailable).
func (m *Client) Attach(peers Peers) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.peers = peers
}

// channel is the peer channel attached; nil before.
func (m *Client) channel() Peers {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.peers
}

// get asks node's manager for what of the sandbox, with the query's
// values beside its UID; the answer is 200.
func (m *Client) get(ctx context.Context, node string, sbx *afev1.Sandbox, what string, query url.Values) (*http.Response, error) {
	peers := m.channel()
	if peers == nil {
		return nil, fmt.Errorf("%w: the peer channel is not up yet", ErrUnavailable)
	}
	pr, err := peers.Peer(ctx, node)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	case !pr.Registered:
		// No manager ever ran there: nothing can come from it.
		return nil, fmt.Errorf("%w: no manager of node %s ever registered", ErrNothingToMove, node)
	case !pr.Live:
		return nil, fmt.Errorf("%w: %s", ErrUnavailable, pr.Gone)
	}
	u := url.URL{Scheme: "https", Host: pr.Address,
		Path: prefix + url.PathEscape(sbx.Namespace) + "/sandboxes/" + url.PathEscape(sbx.Name) + "/" + what, RawQuery: withUID(query, sbx.UID).Encode()}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := (&http.Client{Transport: peers.Transport(node)}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: node %s: %w", ErrUnavailable, node, err)
	}
	if resp.StatusCode == http.StatusOK {
		return resp, nil
	}
	defer func() { _ = resp.Body.Close() }()
	msg := statusMessage(resp)
	switch resp.StatusCode {
	case http.StatusNotFound:
		return nil, fmt.Errorf("%w: node %s: %s", ErrNothingToMove, node, msg)
	case http.StatusServiceUnavailable:
		return nil, fmt.Errorf("%w: node %s: %s", ErrUnavailable, node, msg)
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

// Workspace implements Mover.
func (m *Client) Workspace(ctx context.Context, node string, sbx *afev1.Sandbox) (*Workspace, error) {
	resp, err := m.get(ctx, node, sbx, "workspace", nil)
	if err != nil {
		return nil, err
	}
	return treeOf(resp, node), nil
}

// Snapshot implements Mover.
func (m *Client) Snapshot(ctx context.Context, node string, sbx *afev1.Sandbox, volume string) (*Workspace, error) {
	resp, err := m.get(ctx, node, sbx, "snapshot", url.Values{"volume": {volume}})
	if err != nil {
		return nil, err
	}
	return treeOf(resp, node), nil
}

// Snapshots implements Mover.
func (m *Client) Snapshots(ctx context.Context, sbx *afev1.Sandbox) ([]PeerSnapshot, error) {
	peers := m.channel()
	if peers == nil {
		return nil, fmt.Errorf("%w: the peer channel is not up yet", ErrUnavailable)
	}
	others, err := peers.Others(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	var found []PeerSnapshot
	var errs []error
	for _, pr := range others {
		if !pr.Live {
			continue // a lost node's engine is out of reach
		}
		got, err := m.snapshotsOf(ctx, pr.Node, sbx)
		if err != nil {
			errs = append(errs, err)
		}
		found = append(found, got...)
	}
	return found, errors.Join(errs...)
}

// snapshotsOf asks node's manager for the snapshots of the sandbox's
// ticket it keeps.
func (m *Client) snapshotsOf(ctx context.Context, node string, sbx *afev1.Sandbox) ([]PeerSnapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, snapshotsTimeout)
	defer cancel()
	resp, err := m.get(ctx, node, sbx, "snapshots", nil)
	if errors.Is(err, ErrNothingToMove) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	var answer struct {
		Snapshots []listedSnapshot `json:"snapshots"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&answer); err != nil {
		return nil, fmt.Errorf("node %s: %w", node, err)
	}
	out := make([]PeerSnapshot, 0, len(answer.Snapshots))
	for _, s := range answer.Snapshots {
		out = append(out, PeerSnapshot{Node: node, Volume: s.Volume, Created: s.Created})
	}
	return out, nil
}

// RunLogs implements Mover.
func (m *Client) RunLogs(ctx context.Context, node string, sbx *afev1.Sandbox, runs []types.UID) error {
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

// Live implements Mover.
func (m *Client) Live(ctx context.Context, node string) bool {
	peers := m.channel()
	if peers == nil {
		return false
	}
	pr, err := peers.Peer(ctx, node)
	return err == nil && pr.Live
}

// Holds implements Mover.
func (m *Client) Holds(ctx context.Context, node string, sbx *afev1.Sandbox) (bool, error) {
	// Asked from a reconcile: a manager that does not answer holds no
	// worker.
	ctx, cancel := context.WithTimeout(ctx, holdsTimeout)
	defer cancel()
	resp, err := m.get(ctx, node, sbx, "holds", nil)
	if errors.Is(err, ErrNothingToMove) {
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
