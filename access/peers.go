package access

import (
	"context"
	"fmt"
	"net/http"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"afe.dev/sandbox/move"
)

// In per-node mode each manager says where its peer listener is, and that
// it runs, in a Lease of the controller's namespace: afe-peer-<node>,
// renewed every peerRenew, labelled PeerLabel, with the address in the
// PeerAddressAnnotation. A Lease not renewed for peerLeaseDuration is a
// node whose manager is gone. The address is only where to dial: the
// manager found there must present the node's certificate of the
// managers' CA (internal/peerca), so a Lease written by anyone else can
// make a forward fail, never reach another server.
const (
	peerLeasePrefix       = "afe-peer-"
	PeerLabel             = "sandbox.afe.dev/peer"
	PeerAddressAnnotation = "sandbox.afe.dev/peer-address"
	peerLeaseDuration     = 20 * time.Second
	peerRenew             = 5 * time.Second
)

// peer is a node's manager as its Lease tells it.
type peer struct {
	node, address string
	// live is false when the Lease is missing or was not renewed within
	// its duration.
	live    bool
	renewed time.Time
}

// gone words why a node's manager cannot serve.
func (p peer) gone() string {
	if p.renewed.IsZero() {
		return fmt.Sprintf("the manager of node %s is not running (it never registered)", p.node)
	}
	return fmt.Sprintf("the manager of node %s is not running (last seen %s)", p.node, p.renewed.UTC().Format(time.RFC3339))
}

// peers is the register of the managers, in Leases.
type peers struct {
	c         client.Client
	namespace string
	self      string
	address   string
	now       func() time.Time
}

func peerLeaseName(node string) string { return peerLeasePrefix + node }

// advertise creates or renews this manager's Lease.
func (p *peers) advertise(ctx context.Context) error {
	now := metav1.NewMicroTime(p.now())
	lease := &coordinationv1.Lease{}
	key := types.NamespacedName{Namespace: p.namespace, Name: peerLeaseName(p.self)}
	err := p.c.Get(ctx, key, lease)
	if apierrors.IsNotFound(err) {
		lease.ObjectMeta = metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}
	} else if err != nil {
		return err
	}
	lease.Labels = map[string]string{PeerLabel: "true", "app.kubernetes.io/name": "afe-sandbox"}
	lease.Annotations = map[string]string{PeerAddressAnnotation: p.address}
	lease.Spec = coordinationv1.LeaseSpec{
		HolderIdentity:       ptr.To(p.self),
		LeaseDurationSeconds: ptr.To(int32(peerLeaseDuration / time.Second)),
		RenewTime:            &now,
	}
	if lease.ResourceVersion == "" {
		return p.c.Create(ctx, lease)
	}
	return p.c.Update(ctx, lease)
}

// run renews the Lease until ctx ends; a failed renewal is logged by the
// caller's logger and tried again at the next tick.
func (p *peers) run(ctx context.Context, logErr func(error)) {
	t := time.NewTicker(peerRenew)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := p.advertise(ctx); err != nil && ctx.Err() == nil {
				logErr(err)
			}
		}
	}
}

// lookup is the node's manager; a node with no Lease is not live.
func (p *peers) lookup(ctx context.Context, node string) (peer, error) {
	lease := &coordinationv1.Lease{}
	err := p.c.Get(ctx, types.NamespacedName{Namespace: p.namespace, Name: peerLeaseName(node)}, lease)
	if apierrors.IsNotFound(err) {
		return peer{node: node}, nil
	}
	if err != nil {
		return peer{}, fmt.Errorf("the manager of node %s: %w", node, err)
	}
	if pr := p.of(lease); pr.node == node {
		return pr, nil
	}
	return peer{node: node}, nil
}

// list is every manager that ever registered, but this one.
func (p *peers) list(ctx context.Context) ([]peer, error) {
	leases := &coordinationv1.LeaseList{}
	if err := p.c.List(ctx, leases, client.InNamespace(p.namespace), client.MatchingLabels{PeerLabel: "true"}); err != nil {
		return nil, fmt.Errorf("the managers' leases: %w", err)
	}
	var out []peer
	for i := range leases.Items {
		if pr := p.of(&leases.Items[i]); pr.node != "" && pr.node != p.self {
			out = append(out, pr)
		}
	}
	return out, nil
}

// of reads a Lease: its node is its holder, and only a Lease named after
// its holder counts.
func (p *peers) of(lease *coordinationv1.Lease) peer {
	node := ptr.Deref(lease.Spec.HolderIdentity, "")
	if node == "" || lease.Name != peerLeaseName(node) {
		return peer{}
	}
	pr := peer{node: node, address: lease.Annotations[PeerAddressAnnotation]}
	if lease.Spec.RenewTime != nil {
		pr.renewed = lease.Spec.RenewTime.Time
		d := time.Duration(ptr.Deref(lease.Spec.LeaseDurationSeconds, 0)) * time.Second
		pr.live = pr.address != "" && p.now().Before(pr.renewed.Add(d))
	}
	return pr
}

// MovePeers is the peer channel as the moves of drained tickets use it
// (move.Client.Attach); nil without Options.Peer.
func (s *Server) MovePeers() move.Peers {
	if s.peer == nil {
		return nil
	}
	return movePeers{s.peer}
}

// movePeers gives the moves the register and the transports of the peer
// channel.
type movePeers struct{ p *peering }

// Peer implements move.Peers.
func (m movePeers) Peer(ctx context.Context, node string) (move.Peer, error) {
	pr, err := m.p.peers.lookup(ctx, node)
	if err != nil {
		return move.Peer{}, err
	}
	return pr.forMove(), nil
}

// Others implements move.Peers.
func (m movePeers) Others(ctx context.Context) ([]move.Peer, error) {
	prs, err := m.p.peers.list(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]move.Peer, 0, len(prs))
	for _, pr := range prs {
		out = append(out, pr.forMove())
	}
	return out, nil
}

// Transport implements move.Peers.
func (m movePeers) Transport(node string) http.RoundTripper { return m.p.transport(node) }

// forMove is the peer as the moves see it.
func (p peer) forMove() move.Peer {
	mp := move.Peer{Node: p.node, Address: p.address, Registered: !p.renewed.IsZero(), Live: p.live}
	if !p.live {
		mp.Gone = p.gone()
	}
	return mp
}
