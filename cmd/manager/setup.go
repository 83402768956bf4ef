package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"afe.dev/sandbox/access"
	"afe.dev/sandbox/controllers"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/hostaddrs"
	"afe.dev/sandbox/internal/hostgroups"
	"afe.dev/sandbox/internal/metrics"
	"afe.dev/sandbox/internal/peerca"
	"afe.dev/sandbox/internal/placement"
	"afe.dev/sandbox/internal/sandboxspec"
	"afe.dev/sandbox/internal/subnets"
	"afe.dev/sandbox/internal/telemetry"
	"afe.dev/sandbox/internal/usage"
	"afe.dev/sandbox/move"
)

// setupError is a step of the start that failed: what the log says of it,
// and why.
type setupError struct {
	msg string
	err error
	kv  []any
}

func (e *setupError) Error() string {
	if e.err == nil {
		return e.msg
	}
	return e.msg + ": " + e.err.Error()
}

func (e *setupError) Unwrap() error { return e.err }

// setupFailed is the failure of a step of the start, logged as msg with
// the key-value pairs kv.
func setupFailed(err error, msg string, kv ...any) error {
	return &setupError{msg: msg, err: err, kv: kv}
}

// logSetupError logs the failure that stopped the start.
func logSetupError(log logr.Logger, err error) {
	var se *setupError
	if errors.As(err, &se) {
		log.Error(se.err, se.msg, se.kv...)
		return
	}
	log.Error(err, "Cannot start the manager")
}

// setupOptions sets the options the flags give without the engine's
// help: the usage period and the store of its measurements, the
// environment's deny list and passthrough, and the egress subnets and
// denied addresses.
func setupOptions(log logr.Logger, f *managerFlags) error {
	opts := &f.opts
	if opts.MaxWorkspaceCopyBytes < 0 {
		return setupFailed(fmt.Errorf("--max-workspace-copy-bytes must be 0 or more, not %d", opts.MaxWorkspaceCopyBytes), "Invalid --max-workspace-copy-bytes")
	}
	if opts.MaxPoolReplicas < 0 {
		return setupFailed(fmt.Errorf("--max-pool-replicas must be 0 or more, not %d", opts.MaxPoolReplicas), "Invalid --max-pool-replicas")
	}
	if opts.UsagePeriod > 0 {
		opts.UsagePeriod = max(opts.UsagePeriod, usage.MinPeriod)
	}
	if opts.UsagePeriod >= 0 {
		// What the collector measures, the access API serves.
		measured := &usage.Store{}
		opts.Usage, f.access.Usage = measured, measured
	}
	for _, n := range strings.Split(f.denyEnv, ",") {
		if n = strings.TrimSpace(n); n != "" {
			opts.DenyEnv = append(opts.DenyEnv, n)
		}
	}
	var err error
	if opts.EnvPassthrough, err = passthrough(f.envPassthrough, opts.DenyEnv, os.LookupEnv); err != nil {
		return setupFailed(err, "Invalid --env-passthrough")
	}
	log.Info("Environment passed through", "names", sortedNames(opts.EnvPassthrough))
	if opts.EgressSubnets, err = subnets.Parse(f.egressSubnets); err != nil {
		return setupFailed(err, "Invalid egress subnets")
	}
	if opts.EgressDenyIPs, err = hostaddrs.Parse(f.egressDenyIPs); err != nil {
		return setupFailed(err, "Invalid --egress-deny-ips")
	}
	return nil
}

// setupPolicy sets the options that bound a sandbox's user and runtime;
// the socket of a local engine (host) is looked at for its group.
func setupPolicy(f *managerFlags, host string) error {
	opts := &f.opts
	if err := userPolicy(opts, host, f.denyGIDs, f.groupFile, f.allowedUIDs, f.allowedGIDs); err != nil {
		return setupFailed(err, "Invalid sandbox user policy")
	}
	if err := sandboxIDs(opts, f.sandboxIDRange); err != nil {
		return setupFailed(err, "Invalid sandbox id range")
	}
	var err error
	if opts.Runtimes, opts.DefaultRuntime, err = sandboxspec.ParseRuntimes(f.runtimes, f.defaultRuntime); err != nil {
		return setupFailed(err, "Invalid runtimes")
	}
	return nil
}

// userPolicy sets the options that bound a sandbox's user from the flags;
// the socket of a local engine (host) is looked at for its group.
func userPolicy(opts *controllers.Options, host, denyGIDs, groupFile, allowedUIDs, allowedGIDs string) error {
	var err error
	if opts.DenyGIDs, err = hostgroups.NewDenyList(denyGIDs, hostgroups.SocketPath(host), groupFile); err != nil {
		return err
	}
	// The socket may not be there yet (the engine is away): sandboxes wait,
	// reported as the engine being unavailable, until its group is known.
	_, _ = opts.DenyGIDs.GIDs()
	if opts.AllowedUIDs, err = sandboxspec.ParseIDRanges(allowedUIDs); err != nil {
		return fmt.Errorf("--allowed-uids: %w", err)
	}
	if opts.AllowedGIDs, err = sandboxspec.ParseIDRanges(allowedGIDs); err != nil {
		return fmt.Errorf("--allowed-gids: %w", err)
	}
	return nil
}

// sandboxIDs sets --sandbox-id-range, which every id of must pass the
// user policy.
func sandboxIDs(opts *controllers.Options, flagValue string) error {
	r, err := sandboxspec.ParseIDRange(flagValue)
	if err != nil {
		return fmt.Errorf("--sandbox-id-range: %w", err)
	}
	opts.SandboxIDs = r
	return sandboxspec.CheckSandboxIDs(sandboxspec.Options{SandboxIDs: r, AllowedUIDs: opts.AllowedUIDs, AllowedGIDs: opts.AllowedGIDs})
}

// checkEngine logs the runtimes the engine has of those allowed, and
// refuses egress subnets that collide with the engine's pools or the
// host's routes.
func checkEngine(ctx context.Context, log logr.Logger, engine *docker.Client, opts controllers.Options) error {
	for _, name := range opts.Runtimes {
		if rt, err := engine.Runtime(ctx, name); err != nil {
			log.Info("A runtime on --runtimes is not available: its sandboxes wait (RuntimeUnavailable)", "runtime", name, "error", err.Error())
		} else if err := sandboxspec.UsableRuntime(rt); err != nil {
			log.Info("A runtime on --runtimes is not used: its sandboxes wait (RuntimeUnavailable)", "runtime", name, "reason", err.Error())
		} else {
			log.Info("Runtime", "name", name, "path", rt.Path, "args", rt.Args, "userSpaceKernel", rt.UserSpaceKernel())
		}
	}
	if err := controllers.CheckEgressSubnets(ctx, engine, opts.EgressSubnets); err != nil {
		return setupFailed(err, "The egress subnets collide")
	}
	log.Info("Sandbox user policy", "denyGIDs", opts.DenyGIDs, "allowedUIDs", opts.AllowedUIDs.String(), "allowedGIDs", opts.AllowedGIDs.String(), "sandboxIDs", opts.SandboxIDs.String())
	return nil
}

// newManager makes the manager: its client of the Kubernetes API, its
// cache, endpoints and leader election.
func newManager(f *managerFlags) (ctrl.Manager, error) {
	restConfig := ctrl.GetConfigOrDie()
	restConfig.QPS, restConfig.Burst = float32(f.kubeAPIQPS), f.kubeAPIBurst
	restConfig.Wrap(metrics.CountAPIWrites)
	return ctrl.NewManager(restConfig, ctrl.Options{
		Scheme: scheme,
		// Of the Pods, the manager reads only the placeholders.
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}: {Label: labels.SelectorFromSet(labels.Set{placement.PlaceholderLabel: "true"})},
		}},
		Metrics:                metricsserver.Options{BindAddress: f.metricsAddr},
		HealthProbeBindAddress: f.probeAddr,
		PprofBindAddress:       f.pprofAddr,
		LeaderElection:         f.leaderElect,
		LeaderElectionID:       "afe-controller-" + f.opts.Instance + ".sandbox.afe.dev",
	})
}

// setupRecords opens the telemetry database and the Run log folder, when
// asked for, and gives them to the reconcilers and the access API.
func setupRecords(log logr.Logger, mgr ctrl.Manager, f *managerFlags) error {
	if f.telemetryDB != "" {
		store, err := telemetry.Open(f.telemetryDB, f.telemetryOpts)
		if err != nil {
			return setupFailed(err, "Cannot open the telemetry database")
		}
		f.opts.Telemetry, f.access.Telemetry = store, store
		executions := &telemetry.Executions{}
		f.opts.Executions, f.access.Executions = executions, executions
		// It closes the store (committing what is queued) when the
		// manager stops.
		if err := mgr.Add(&controllers.TelemetryPruner{Store: store, Period: time.Minute, Sandboxes: mgr.GetClient()}); err != nil {
			return setupFailed(err, "Cannot add the telemetry pruner")
		}
		log.Info("Command telemetry", "db", f.telemetryDB, "retention", f.telemetryOpts.Retention, "maxBytes", f.telemetryOpts.MaxBytes,
			"namespaceMaxRecords", f.telemetryOpts.NamespaceMaxRecords)
	}
	if f.runLogs.Max <= 0 {
		return nil
	}
	runLogs := &f.runLogs
	explicit := runLogs.Dir != ""
	if !explicit {
		runLogs.Dir = filepath.Join(os.TempDir(), "afe-run-logs-"+f.opts.Instance)
	}
	switch err := os.MkdirAll(runLogs.Dir, 0o700); {
	case err != nil && explicit:
		return setupFailed(err, "Cannot make the Run log folder", "dir", runLogs.Dir)
	case err != nil:
		// No writable temporary folder (an image from scratch with a
		// read-only root): the manager runs, keeping no Run logs.
		log.Info("No Run logs are kept: the temporary folder is not writable; set --run-log-dir", "dir", runLogs.Dir, "error", err.Error())
	default:
		f.opts.RunLogs, f.access.RunLogs = runLogs, runLogs
	}
	return nil
}

// setupMoves gives the controllers, in per-node mode with the managers'
// peer channel, the moves of drained tickets with their workspaces (their
// channel is attached once the access API is made); nil without it.
func setupMoves(f *managerFlags) *move.Client {
	if !f.opts.PerNode || f.access.BindAddress == "0" || f.peer.BindAddress == "0" {
		return nil
	}
	moves := &move.Client{Store: f.opts.RunLogs}
	f.opts.Moves = moves
	return moves
}

// setupAccess adds the access API (kubectl afe) to the manager unless
// --access-bind-address is "0", and attaches the moves to it.
func setupAccess(ctx context.Context, mgr ctrl.Manager, engine *docker.Client, f *managerFlags, moves *move.Client) error {
	if f.access.BindAddress == "0" {
		return nil
	}
	ns, name, ok := strings.Cut(f.accessService, "/")
	if !ok || ns == "" || name == "" {
		return setupFailed(nil, "--access-service must be namespace/name", "value", f.accessService)
	}
	opts := f.access
	opts.Service = types.NamespacedName{Namespace: ns, Name: name}
	opts.ServicePort = int32(f.accessPort)
	opts.Instance = f.opts.Instance
	opts.DenyEnv, opts.EnvPassthrough = f.opts.DenyEnv, f.opts.EnvPassthrough
	if f.peer.BindAddress != "0" {
		if !f.opts.PerNode {
			return setupFailed(nil, "--peer-bind-address needs --per-node")
		}
		authority, err := setupPeerCA(ctx, mgr, types.NamespacedName{Namespace: ns, Name: peerCASecret}, f.opts.Instance, f.access.ExternalName != "")
		if err != nil {
			return err
		}
		peer := f.peer
		peer.Authority = authority
		opts.Peer = &peer
	}
	server, err := access.New(mgr, engine, opts)
	if err != nil {
		return setupFailed(err, "Cannot set up the access API")
	}
	if moves != nil {
		moves.Attach(server.MovePeers())
	}
	if err := mgr.Add(server); err != nil {
		return setupFailed(err, "Cannot add the access API")
	}
	// Ready once it answers and is registered: a Deployment's Service
	// reaches only a manager that serves it.
	if err := mgr.AddReadyzCheck("access", server.Ready); err != nil {
		return setupFailed(err, "Cannot add the access API's readiness check")
	}
	return nil
}

// setupChecks adds the health check and the readiness check, which asks
// the engine.
func setupChecks(mgr ctrl.Manager, engine *docker.Client) error {
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return setupFailed(err, "Cannot add the health check")
	}
	if err := mgr.AddReadyzCheck("docker", func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), 3*time.Second)
		defer cancel()
		return engine.Ping(ctx)
	}); err != nil {
		return setupFailed(err, "Cannot add the readiness check")
	}
	return nil
}

// setupStateMetrics registers the series computed at each scrape: whether
// the engine answers (afe_docker_up) and the state of the Sandboxes from the
// cache (afe_sandbox_status...), which the alerts of config/prometheus use.
func setupStateMetrics(mgr ctrl.Manager, engine *docker.Client) error {
	for _, c := range []prometheus.Collector{
		metrics.NewEngineUp(engine.Ping, 3*time.Second),
		&metrics.SandboxStates{Reader: mgr.GetCache()},
	} {
		if err := crmetrics.Registry.Register(c); err != nil {
			return setupFailed(err, "Cannot register the state metrics")
		}
	}
	return nil
}

// warnWorkspaceRoot logs why Folder workspaces will be refused, or allowed
// on a root that is not mounted nosuid,nodev.
func warnWorkspaceRoot(log logr.Logger, opts controllers.Options, localEngine bool, host string) {
	if opts.WorkspaceRoot == "" {
		return
	}
	if !localEngine && !opts.WorkspaceRootShared {
		log.Info("Folder workspaces are refused: the Docker engine is not on a local unix socket; set --workspace-root-shared if it sees --workspace-root at the same path", "docker", host)
	}
	if err := sandboxspec.CheckRootMount(opts.WorkspaceRoot); err != nil && !opts.WorkspaceRootAllowSuid {
		log.Error(err, "Folder workspaces are refused (WorkspaceRootUnsafe) until --workspace-root is mounted nosuid,nodev", "workspaceRoot", opts.WorkspaceRoot)
	} else if err != nil {
		log.Info("Folder workspaces are allowed on a root not mounted nosuid,nodev (--workspace-root-allow-suid)", "workspaceRoot", opts.WorkspaceRoot)
	}
}

// setupPlacementKey, in per-node mode, reads (or makes) the managers' key,
// the Secret placement.KeySecret of the --access-service's namespace: the
// managers sign the placeholders they make with it, and trust the binding
// of no other Pod. With --access-external-name (a local control plane) it
// makes the namespace when missing, as setupPeerCA does.
func setupPlacementKey(ctx context.Context, mgr ctrl.Manager, f *managerFlags) error {
	if !f.opts.PerNode {
		return nil
	}
	ns, _, _ := strings.Cut(f.accessService, "/")
	if ns == "" {
		return setupFailed(nil, "--access-service must be namespace/name", "value", f.accessService)
	}
	c, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme()})
	if err != nil {
		return setupFailed(err, "Cannot make a client for the placement key")
	}
	var last error
	err = wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		if f.access.ExternalName != "" {
			err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				last = err
				return false, nil
			}
		}
		f.opts.PlacementKey, last = placement.LoadKey(ctx, c, ns)
		return last == nil, nil
	})
	if err != nil {
		return setupFailed(errors.Join(last, err), "Cannot read or make the placement key", "secret", ns+"/"+placement.KeySecret)
	}
	f.peer.PlacementKey = f.opts.PlacementKey
	return nil
}

// peerCASecret is the Secret, in the access API Service's namespace, of
// the CA the managers of per-node mode share.
const peerCASecret = "afe-peer-ca"

// setupPeerCA reads (or makes) the managers' CA and this node's
// certificate, through a client without a cache (no Secret is cached),
// and keeps them fresh while the manager runs. With makeNamespace (a
// local control plane, where the manager also writes the access API's
// Service) it makes the Secret's namespace when missing.
func setupPeerCA(ctx context.Context, mgr ctrl.Manager, secret types.NamespacedName, node string, makeNamespace bool) (*peerca.Authority, error) {
	c, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme()})
	if err != nil {
		return nil, setupFailed(err, "Cannot make a client for the managers' CA")
	}
	if makeNamespace {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: secret.Namespace}}
		if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, setupFailed(err, "Cannot make the namespace of the managers' CA", "namespace", secret.Namespace)
		}
	}
	authority, err := peerca.New(c, peerca.Options{Secret: secret, Node: node})
	if err != nil {
		return nil, setupFailed(err, "Cannot set up the managers' CA")
	}
	// The namespace may be on its way (under make run NODES=3 the first
	// manager makes it): a failure is tried again for a minute.
	var last error
	err = wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		last = authority.Ensure(ctx)
		return last == nil, nil
	})
	if err != nil {
		return nil, setupFailed(errors.Join(last, err), "Cannot read or make the managers' CA", "secret", secret.String())
	}
	if err := mgr.Add(authority); err != nil {
		return nil, setupFailed(err, "Cannot add the managers' CA")
	}
	return authority, nil
}
