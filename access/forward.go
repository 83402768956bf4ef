package access

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"

	accessv1 "afe.dev/sandbox/api/access/v1alpha1"
	"afe.dev/sandbox/internal/metrics"
	"afe.dev/sandbox/internal/peerca"
	"afe.dev/sandbox/internal/placement"
	"afe.dev/sandbox/move"
)

// PeerOptions turn on forwarding between the managers of per-node mode.
type PeerOptions struct {
	// Authority is this manager's identity towards the others, and theirs
	// towards it.
	Authority *peerca.Authority
	// BindAddress is the peer listener's host:port (port 0: a free one).
	BindAddress string
	// AdvertiseAddress is the host:port the other managers dial; empty is
	// the bound address, which must then name a host.
	AdvertiseAddress string
	// PlacementKey is the managers' key: a sandbox's node is read only
	// from a placeholder Pod a manager signed with it (placement.Check).
	PlacementKey placement.Key
}

// The identity of the caller a manager forwards a request for. They are
// read only on the peer listener, from a connection whose client
// certificate is a manager's of the managers' CA; anywhere else they mean
// nothing, and a forward sets them afresh.
const (
	peerUserHeader  = "X-Afe-Peer-User"
	peerUIDHeader   = "X-Afe-Peer-Uid"
	peerGroupHeader = "X-Afe-Peer-Group"
	peerExtraPrefix = "X-Afe-Peer-Extra-"
)

// peering is the state of forwarding: the peer listener, the register of
// the managers, and a transport per node.
type peering struct {
	authority *peerca.Authority
	peers     *peers
	listener  net.Listener

	mu         sync.Mutex
	transports map[string]*http.Transport
}

// transport reaches node's manager: this manager's certificate, and only
// node's certificate accepted (peerca.ClientConfig); HTTP/1.1, which
// upgrades need.
func (p *peering) transport(node string) *http.Transport {
	p.mu.Lock()
	defer p.mu.Unlock()
	if t, ok := p.transports[node]; ok {
		return t
	}
	t := &http.Transport{
		TLSClientConfig:     p.authority.ClientConfig(node),
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     90 * time.Second,
	}
	p.transports[node] = t
	return t
}

// forward sends the request to the manager of the node the sandbox is on,
// as the caller this manager authenticated and authorized (the receiver
// authorizes them again), streams and upgrades included.
func (s *Server) forward(w http.ResponseWriter, r *http.Request, req *request, to peer) {
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host, pr.Out.Host = "https", to.address, to.address
			setForwardedUser(pr.Out.Header, req.user)
		},
		Transport: s.peer.transport(to.node),
		// Output (logs -f, a download) goes on as it comes.
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			s.log.Info("A peer manager did not answer", "node", to.node, "address", to.address, "error", err.Error())
			writeStatus(w, http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, accessv1.ReasonNodeUnavailable,
				fmt.Sprintf("the manager of node %s does not answer: %v", to.node, err))
		},
	}
	s.log.Info("Forwarding an access request", "node", to.node, "user", req.user.GetName(), "method", r.Method,
		"namespace", req.namespace, "name", req.name, "path", r.URL.Path)
	metrics.AccessForwards.WithLabelValues(to.node).Inc()
	proxy.ServeHTTP(w, r)
}

// setForwardedUser writes the caller's identity for the receiving manager,
// after removing every header that carries one: the front proxy's, a
// bearer token, impersonation, and any peer header the request came with.
func setForwardedUser(h http.Header, u user.Info) {
	for k := range h {
		lk := strings.ToLower(k)
		if lk == "authorization" || strings.HasPrefix(lk, "x-remote-") || strings.HasPrefix(lk, "impersonate-") || strings.HasPrefix(lk, "x-afe-peer-") {
			delete(h, k)
		}
	}
	h.Set(peerUserHeader, u.GetName())
	if uid := u.GetUID(); uid != "" {
		h.Set(peerUIDHeader, uid)
	}
	for _, g := range u.GetGroups() {
		h.Add(peerGroupHeader, g)
	}
	for k, vs := range u.GetExtra() {
		for _, v := range vs {
			h.Add(peerExtraPrefix+url.PathEscape(k), v)
		}
	}
}

// forwardedUser is the caller a peer manager forwarded the request for;
// false without a user name.
func forwardedUser(h http.Header) (user.Info, bool) {
	name := h.Get(peerUserHeader)
	if name == "" {
		return nil, false
	}
	u := &user.DefaultInfo{Name: name, UID: h.Get(peerUIDHeader), Groups: h.Values(peerGroupHeader)}
	for k, vs := range h {
		if !strings.HasPrefix(k, peerExtraPrefix) {
			continue
		}
		key, err := url.PathUnescape(strings.TrimPrefix(k, peerExtraPrefix))
		if err != nil {
			continue
		}
		if u.Extra == nil {
			u.Extra = map[string][]string{}
		}
		u.Extra[strings.ToLower(key)] = append(u.Extra[strings.ToLower(key)], vs...)
	}
	return u, true
}

// servePeer serves a request another manager forwarded: only on a
// connection whose client certificate is a manager's of the managers' CA
// (the listener verified the chain; PeerNode checks it is a manager's),
// and as the caller it names, who is authorized again here. Such a
// request is never forwarded again.
func (s *Server) servePeer(w http.ResponseWriter, r *http.Request) {
	from, ok := peerca.PeerNode(r.TLS)
	if !ok {
		writeStatus(w, http.StatusUnauthorized, metav1.StatusReasonUnauthorized, "", "Unauthorized: not a manager's certificate")
		return
	}
	if move.IsRoute(r.URL.Path) {
		// A manager's own request, for a moved ticket.
		s.moves.Serve(w, r, from)
		return
	}
	u, ok := forwardedUser(r.Header)
	if !ok || u.GetName() == user.Anonymous {
		writeStatus(w, http.StatusUnauthorized, metav1.StatusReasonUnauthorized, "", "Unauthorized: no forwarded user")
		return
	}
	s.handle(w, r, u, from)
}

// startPeer binds the peer listener and registers this manager.
func (s *Server) startPeer(ctx context.Context) (*http.Server, error) {
	if err := s.peer.peers.advertise(ctx); err != nil {
		return nil, fmt.Errorf("register this manager in the lease %s/%s: %w", s.peer.peers.namespace, peerLeaseName(s.opts.Instance), err)
	}
	go s.peer.peers.run(ctx, func(err error) { s.log.Error(err, "Cannot renew this manager's peer lease") })
	srv := &http.Server{
		Handler:           http.HandlerFunc(s.servePeer),
		ReadHeaderTimeout: 30 * time.Second,
		TLSConfig:         s.peer.authority.ServerConfig(),
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	return srv, nil
}
