package access

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	apirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	accessv1 "afe.dev/sandbox/api/access/v1alpha1"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/metrics"
	"afe.dev/sandbox/internal/pki"
	"afe.dev/sandbox/internal/runlog"
	"afe.dev/sandbox/internal/sandboxenv"
	"afe.dev/sandbox/internal/telemetry"
	"afe.dev/sandbox/internal/usage"
	"afe.dev/sandbox/move"
)

// The access API's group and version (written once, in the public package
// api/access/v1alpha1), and the name of its APIService.
const (
	Group          = accessv1.GroupName
	Version        = accessv1.Version
	APIServiceName = Version + "." + Group
)

// Engine is what the access API needs of the Docker engine, the moves it
// serves on its peer listener included (move.Engine).
type Engine interface {
	move.Engine
	InspectContainer(ctx context.Context, name string) (*docker.Container, error)
	// InspectVolume reads a claimed sandbox's claim record.
	InspectVolume(ctx context.Context, name string) (*docker.Volume, error)
	ExecStream(ctx context.Context, containerID string, spec docker.StreamSpec) (int, error)
	OpenFilesHelper(ctx context.Context, spec docker.FilesHelperSpec) (*docker.FilesHelper, error)
	Runtime(ctx context.Context, name string) (docker.Runtime, error)
}

// Options configure the access API.
type Options struct {
	// BindAddress is host:port; port 0 takes a free one (Addr tells which).
	BindAddress string
	// CertDir holds tls.crt and tls.key (and ca.crt, the CA registered in
	// the APIService); empty makes a CA and a serving certificate in memory.
	CertDir string
	// Service is the Service the APIService points at, and its port (0 is
	// 443; with ExternalName, the bound port).
	Service     types.NamespacedName
	ServicePort int32
	// Register writes the APIService (with the serving CA) at start.
	Register bool
	// ExternalName, when set, also writes the Service, as an ExternalName
	// service resolving to that host at the bound port: for a control plane
	// with no cluster network (make run, the tests), "localhost".
	ExternalName string
	// Instance is the controller's --instance: only containers it made are
	// reached.
	Instance string
	// RunLogs are the Run logs the controllers keep; nil serves none.
	RunLogs *runlog.Store
	// Telemetry is the command telemetry: execs through the API are
	// recorded in it, and it is served; nil records and serves none.
	Telemetry *telemetry.Store
	// Executions are told of each exec's start and end (nil: nothing is).
	Executions *telemetry.Executions
	// Usage is what the usage collector last measured, served as
	// sandboxusages; nil serves none.
	Usage *usage.Store
	// MaxFileBytes bounds the tar of one file transfer (0 is
	// DefaultMaxFileBytes).
	MaxFileBytes int64
	// SpoolDir is where file transfers are spooled, MaxFileBytes at most
	// each; empty is the temporary folder.
	SpoolDir string
	// DenyEnv and EnvPassthrough are the controller's --deny-env and
	// --env-passthrough (each listed name with its value, nil when
	// unset): a sandbox's declared env is resolved with them for each
	// exec, as the controllers resolve it.
	DenyEnv        []string
	EnvPassthrough map[string]*string
	// Peer, in per-node mode, forwards a request about another node's
	// sandbox to that node's manager, and gathers telemetry from every
	// node; nil serves this manager's sandboxes only. With it and no
	// CertDir, the serving certificate is issued from the managers' CA,
	// so that every manager registers the same CA in the APIService.
	Peer *PeerOptions
}

// The manager checks callers with the API server (as system:auth-delegator
// grants), reads the front proxy's CA, and registers its APIService.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
// +kubebuilder:rbac:groups="",resources=configmaps,resourceNames=extension-apiserver-authentication,verbs=get;list;watch
// +kubebuilder:rbac:groups=apiregistration.k8s.io,resources=apiservices,verbs=get;create;update;patch

// Server is the access API server, a manager Runnable.
type Server struct {
	opts   Options
	engine Engine
	reader client.Reader
	writer client.Client
	// env resolves the declared env of a sandbox for an exec in it.
	env  sandboxenv.Resolver
	auth *delegated
	info *apirequest.RequestInfoFactory
	log  logr.Logger

	listener net.Listener
	// certificate is the serving certificate, caBundle the CA it is
	// verified with (both follow the managers' CA in per-node mode).
	certificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	caBundle    func() []byte
	// peer is per-node forwarding (nil without Options.Peer).
	peer *peering
	// moves serves the other managers' moves on the peer listener.
	moves *move.Handler
	// serving is set once the server answers and is registered (Ready).
	serving atomic.Bool
}

// New prepares the server and binds its port; Start serves.
func New(mgr ctrl.Manager, engine Engine, opts Options) (*Server, error) {
	if opts.Instance == "" {
		return nil, errors.New("access API: no controller instance")
	}
	kube, err := kubernetes.NewForConfig(mgr.GetConfig())
	if err != nil {
		return nil, err
	}
	auth, err := newDelegated(kube)
	if err != nil {
		return nil, err
	}
	// The APIService and Service are written through a client without a
	// cache (the manager's would watch every APIService).
	writer, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme()})
	if err != nil {
		return nil, err
	}
	s := &Server{
		opts:   opts,
		engine: engine,
		reader: mgr.GetAPIReader(),
		writer: writer,
		// Secrets are read from the API server, never cached.
		env:  sandboxenv.Resolver{Reader: mgr.GetAPIReader(), DenyEnv: opts.DenyEnv, Passthrough: opts.EnvPassthrough},
		auth: auth,
		info: &apirequest.RequestInfoFactory{APIPrefixes: sets.NewString("apis"), GrouplessAPIPrefixes: sets.NewString("api")},
		log:  ctrl.Log.WithName("access"),
	}
	s.moves = &move.Handler{Reader: s.reader, Engine: engine, Instance: opts.Instance, RunLogs: opts.RunLogs,
		Placed: s.placedNode, Held: s.heldContainer, Log: s.log}
	if err := s.loadCert(); err != nil {
		return nil, err
	}
	if s.listener, err = net.Listen("tcp", opts.BindAddress); err != nil {
		return nil, fmt.Errorf("access API: listen on %s: %w", opts.BindAddress, err)
	}
	if opts.Peer != nil {
		if s.peer, err = newPeering(writer, opts); err != nil {
			_ = s.listener.Close()
			return nil, err
		}
	}
	return s, nil
}

// newPeering binds the peer listener and prepares this manager's Lease,
// in the namespace of the access API's Service (the controller's).
func newPeering(c client.Client, opts Options) (*peering, error) {
	ln, err := net.Listen("tcp", opts.Peer.BindAddress)
	if err != nil {
		return nil, fmt.Errorf("access API: peer listener on %s: %w", opts.Peer.BindAddress, err)
	}
	addr := opts.Peer.AdvertiseAddress
	if addr == "" {
		addr = ln.Addr().String()
		if ip := ln.Addr().(*net.TCPAddr).IP; ip.IsUnspecified() {
			_ = ln.Close()
			return nil, fmt.Errorf("access API: the peer listener binds every address (%s): say which one the other managers dial (--peer-advertise-address)", addr)
		}
	}
	return &peering{
		authority:  opts.Peer.Authority,
		peers:      &peers{c: c, namespace: opts.Service.Namespace, self: opts.Instance, address: addr, now: time.Now},
		listener:   ln,
		transports: map[string]*http.Transport{},
	}, nil
}

// Addr is where the server listens.
func (s *Server) Addr() net.Addr { return s.listener.Addr() }

// CABundle is the CA the serving certificate is verified with.
func (s *Server) CABundle() []byte { return s.caBundle() }

// PeerAddr is where the peer listener listens (nil without Options.Peer).
func (s *Server) PeerAddr() net.Addr {
	if s.peer == nil {
		return nil
	}
	return s.peer.listener.Addr()
}

// NeedLeaderElection is false: every replica reaches the same engine.
func (s *Server) NeedLeaderElection() bool { return false }

// Start serves until ctx ends. The APIService is written once the server
// answers (awaitAnswer), and the server is ready then (Ready).
func (s *Server) Start(ctx context.Context) error {
	defer func() { _ = s.listener.Close() }()
	if err := s.auth.run(ctx); err != nil {
		return fmt.Errorf("access API: %w", err)
	}
	servers := map[*http.Server]net.Listener{s.httpServer(ctx): s.listener}
	if s.peer != nil {
		peerSrv, err := s.startPeer(ctx)
		if err != nil {
			return fmt.Errorf("access API: %w", err)
		}
		defer func() { _ = s.peer.listener.Close() }()
		servers[peerSrv] = s.peer.listener
		s.log.Info("Serving the other managers", "address", s.PeerAddr().String(), "advertised", s.peer.peers.address)
	}
	errs := make(chan error, len(servers))
	for srv, ln := range servers {
		go func() { errs <- srv.ServeTLS(ln, "", "") }()
	}
	defer shutdown(ctx, servers)
	if s.opts.Register {
		if err := s.awaitAnswer(ctx, errs); err != nil {
			return err
		}
		if err := s.register(ctx); err != nil {
			return fmt.Errorf("access API: register: %w", err)
		}
		if s.peer != nil {
			go s.registerOnRotation(ctx)
		}
	}
	s.serving.Store(true)
	s.log.Info("Serving the access API", "address", s.Addr().String(), "apiService", APIServiceName)
	select {
	case <-ctx.Done():
		return nil
	case err := <-errs:
		return err
	}
}

// httpServer is the access API's server.
func (s *Server) httpServer(ctx context.Context) *http.Server {
	return &http.Server{
		Handler:           metrics.CountAccessRequests(s),
		ReadHeaderTimeout: 30 * time.Second,
		TLSConfig: &tls.Config{
			MinVersion:     tls.VersionTLS12,
			GetCertificate: s.certificate,
			// Client certificates are verified by the authenticator
			// (against the front proxy's CA or the client CA).
			ClientAuth: tls.RequestClientCert,
			// SPDY upgrades need HTTP/1.1.
			NextProtos: []string{"http/1.1"},
		},
		BaseContext: func(net.Listener) context.Context { return ctx },
	}
}

// shutdown stops the servers, letting requests in flight end for a few
// seconds.
func shutdown(ctx context.Context, servers map[*http.Server]net.Listener) {
	stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	for srv := range servers {
		_ = srv.Shutdown(stop)
	}
}

// loadCert reads the serving certificate of CertDir, or makes one signed
// by a new CA for the Service's names and loopback.
func (s *Server) loadCert() error {
	if dir := s.opts.CertDir; dir != "" {
		cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
		if err != nil {
			return fmt.Errorf("access API: serving certificate: %w", err)
		}
		ca, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		s.setCert(cert, ca)
		return nil
	}
	svc := s.opts.Service.Name + "." + s.opts.Service.Namespace + ".svc"
	names, ips := []string{svc, svc + ".cluster.local", "localhost"}, []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	if s.opts.Peer != nil {
		s.certificate = s.opts.Peer.Authority.ServingCertificate(names, ips)
		s.caBundle = s.opts.Peer.Authority.CABundle
		return nil
	}
	ca, err := pki.NewCA("afe-access-ca")
	if err != nil {
		return err
	}
	pair, err := ca.IssueServer(svc, names, ips)
	if err != nil {
		return err
	}
	cert, err := tls.X509KeyPair(pair.CertPEM, pair.KeyPEM)
	if err != nil {
		return err
	}
	s.setCert(cert, ca.CertPEM)
	return nil
}

// setCert serves one certificate for good.
func (s *Server) setCert(cert tls.Certificate, ca []byte) {
	s.certificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &cert, nil }
	s.caBundle = func() []byte { return ca }
}

// port is the bound port.
func (s *Server) port() int32 {
	_, p, _ := net.SplitHostPort(s.Addr().String())
	n, _ := strconv.Atoi(p)
	return int32(n)
}
