package access

import (
	"context"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	accessv1 "afe.dev/sandbox/api/access/v1alpha1"
	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/placement"
)

// In per-node mode a request about a sandbox is served by the manager of
// the node its Ticket is placed on. The node is read from the Ticket's
// placeholder Pod, and only from a Pod whose controller reference names
// the Ticket's UID, that a manager signed and kube-scheduler bound
// (placement.Check): never from status.node, which the Ticket's users may
// write, nor from a Pod they made.

// action is what a manager does with a request.
type action int

const (
	// serveHere: the sandbox is this node's, or nothing is known of it
	// (this manager's own answer, a 404 say, is right).
	serveHere action = iota
	// forwardTo: the sandbox is another node's, whose manager runs.
	forwardTo
	// nodeGone: the sandbox is another node's, whose manager does not run.
	nodeGone
	// refuseHop: a forwarded request for a sandbox that is not this
	// node's (it moved meanwhile, or the forwarder was wrong): it is never
	// forwarded again.
	refuseHop
)

// decide is the routing decision: node is where the sandbox is placed
// (empty when nothing is known), hop is true for a request another
// manager forwarded, live whether node's manager runs.
func decide(self, node string, hop, live bool) action {
	switch {
	case node == "" || node == self:
		return serveHere
	case hop:
		return refuseHop
	case live:
		return forwardTo
	}
	return nodeGone
}

// placedNode is the node of the sandbox of that namespace and name: its
// controlling Ticket's placeholder Pod's node. It is empty, with no error,
// when the Sandbox does not exist (the local answer says so). A Sandbox
// that is not placed (no Ticket, or its Pod not bound yet) is refused as
// not ready: no manager has its container.
func (s *Server) placedNode(ctx context.Context, namespace, name string) (string, error) {
	sbx := &afev1.Sandbox{}
	if err := s.reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, sbx); err != nil {
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		return "", err
	}
	ref := metav1.GetControllerOf(sbx)
	if ref == nil || ref.Kind != "Ticket" || ref.APIVersion != afev1.GroupVersion.String() {
		return "", notReady("sandbox %s has no Ticket: in per-node mode only a Ticket's sandboxes are placed on a node", name)
	}
	tk := &afev1.Ticket{}
	if err := s.reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: ref.Name}, tk); err != nil || tk.UID != ref.UID {
		if err == nil || apierrors.IsNotFound(err) {
			return "", notReady("the Ticket %s of sandbox %s is gone", ref.Name, name)
		}
		return "", err
	}
	node, err := placement.PlacedOn(ctx, s.reader, s.placementKey(), tk)
	if err != nil {
		return "", err
	}
	if node == "" {
		return "", notReady("ticket %s of sandbox %s is not placed on a node yet", tk.Name, name)
	}
	return node, nil
}

// placementKey is the managers' key the placeholders are verified with
// (none without the peer channel: no Pod places anything).
func (s *Server) placementKey() placement.Key {
	if s.opts.Peer == nil {
		return nil
	}
	return s.opts.Peer.PlacementKey
}

// sandboxOf names the sandbox a request is about: the object itself, or a
// Run's sandbox. Telemetry is gathered from every node instead.
func (s *Server) sandboxOf(ctx context.Context, resource, namespace, name string) (string, error) {
	if resource != accessv1.ResourceRuns {
		return name, nil
	}
	run := &afev1.Run{}
	if err := s.reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, run); err != nil {
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		return "", err
	}
	return run.Spec.SandboxRef.Name, nil
}

// route serves, forwards or refuses a request about a sandbox or a Run in
// per-node mode; it returns false when the request is to be served here.
func (s *Server) route(w http.ResponseWriter, r *http.Request, req *request, resource string) bool {
	ctx := r.Context()
	sbx, err := s.sandboxOf(ctx, resource, req.namespace, req.name)
	node := ""
	if err == nil && sbx != "" {
		node, err = s.placedNode(ctx, req.namespace, sbx)
	}
	if err != nil {
		writeError(w, err)
		return true
	}
	var pr peer
	if node != "" && node != s.opts.Instance && req.hop == "" {
		if pr, err = s.peer.peers.lookup(ctx, node); err != nil {
			writeError(w, err)
			return true
		}
	}
	switch decide(s.opts.Instance, node, req.hop != "", pr.live) {
	case forwardTo:
		s.forward(w, r, req, pr)
	case nodeGone:
		writeStatus(w, http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, accessv1.ReasonNodeUnavailable, pr.gone())
	case refuseHop:
		writeError(w, conflict(accessv1.ReasonSandboxNotReady,
			"sandbox %s is placed on node %s, not on %s, where node %s's manager sent the request: try again", sbx, node, s.opts.Instance, req.hop))
	default:
		return false
	}
	return true
}
