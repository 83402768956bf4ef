// Command manager runs the afe sandbox controller.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	_ "k8s.io/client-go/plugin/pkg/client/auth"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"afe.dev/sandbox/access"
	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/controllers"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/hostaddrs"
	"afe.dev/sandbox/internal/hostgroups"
	"afe.dev/sandbox/internal/metrics"
	"afe.dev/sandbox/internal/placement"
	"afe.dev/sandbox/internal/runlog"
	"afe.dev/sandbox/internal/sandboxspec"
	"afe.dev/sandbox/internal/status"
	"afe.dev/sandbox/internal/subnets"
	"afe.dev/sandbox/internal/telemetry"
)

var scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(afev1.AddToScheme(scheme))
	// The engine's request count, beside the controller's own metrics
	// (internal/metrics, which links no Docker SDK).
	crmetrics.Registry.MustRegister(docker.Requests)
}

func main() {
	if len(os.Args) == 2 && os.Args[1] == "pause" {
		os.Exit(pause())
	}
	os.Exit(run())
}

// pauseReady is what pause prints once a SIGTERM ends it.
const pauseReady = "afe placeholder: holding this ticket's place until stopped"

// pause is the placeholder Pods' command in per-node mode: it holds the
// ticket's place on its node, doing nothing until it is stopped.
func pause() int {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	// From here on a SIGTERM ends it (before, as PID 1, it would be ignored
	// and the kubelet would kill it after the grace period).
	fmt.Println(pauseReady)
	<-stop
	return 0
}

func run() int {
	var (
		metricsAddr, probeAddr string
		pprofAddr              string
		leaderElect            bool
		dockerHost, denyEnv    string
		opts                   controllers.Options
		denyGIDs, groupFile    string
		allowedUIDs            string
		allowedGIDs            string
		sandboxIDRange         string
		runtimes               string
		defaultRuntime         string
		envPassthrough         string
		telemetryDB            string
		telemetryOpts          telemetry.Options
		egressSubnets          string
		kubeAPIQPS             float64
		kubeAPIBurst           int
	)
	flag.Float64Var(&kubeAPIQPS, "kube-api-qps", 100, "Requests per second the manager makes to the Kubernetes API at most, sustained (client-go's default of 20 holds a burst of 50 Tickets back).")
	flag.IntVar(&kubeAPIBurst, "kube-api-burst", 200, "Requests the manager makes to the Kubernetes API at once at most, above --kube-api-qps.")
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8080", "The address the metrics endpoint binds to; 0 disables it.")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "The address the health probes bind to.")
	flag.StringVar(&pprofAddr, "pprof-bind-address", "0", "The address the pprof endpoints bind to; 0 disables them.")
	flag.BoolVar(&leaderElect, "leader-elect", false, "Elect a leader, so that only one manager acts at a time.")
	flag.StringVar(&dockerHost, "docker-host", "", "The Docker engine (unix:// or tcp://); default DOCKER_HOST or the local socket. TLS from DOCKER_CERT_PATH and DOCKER_TLS_VERIFY.")
	flag.StringVar(&opts.ProxyImage, "proxy-image", "afe/egress-proxy:dev", "The egress proxy image.")
	flag.StringVar(&opts.EgressNetwork, "egress-network", "bridge", "The network egress proxies reach the outside through.")
	flag.BoolVar(&opts.EgressAllowPrivate, "egress-allow-private", false, "Let egress proxies reach private, loopback and link-local addresses; never the engine host's own (docs/security.md).")
	var egressDenyIPs string
	flag.StringVar(&egressDenyIPs, "egress-deny-ips", "", "Comma-separated addresses or CIDRs of the engine's host that egress proxies refuse besides those the manager finds (the gateways of the engine's networks, and the host's interfaces when the manager runs in the host's network namespace): for a remote engine, or a manager in a pod.")
	flag.StringVar(&egressSubnets, "egress-subnets", subnets.Default, "Comma-separated IPv4 CIDRs the internal networks of sandboxes with egress get their subnets from, a /29 each (the default holds 16384); they must not overlap the engine's default address pools or the host's routes (checked at start). Empty leaves the subnets to the engine's pools (about 30 networks with its defaults).")
	flag.StringVar(&opts.WorkspaceRoot, "workspace-root", "", "The host folder Folder workspaces live under, in a folder per namespace (<root>/<namespace>/...); empty refuses Folder workspaces.")
	flag.StringVar(&denyEnv, "deny-env", "", "Comma-separated env names refused in sandboxes, added to the built-in list ("+strings.Join(sandboxspec.DefaultDenyEnv, ",")+").")
	flag.StringVar(&opts.Instance, "instance", "default", "The name of this controller instance, the afe.controller label of its Docker objects. With --per-node, the name of this manager's node.")
	flag.BoolVar(&opts.PerNode, "per-node", false, "Run as one manager per node (config/per-node, a DaemonSet): each Ticket gets a placeholder Pod that kube-scheduler places, and this manager acts only on the tickets placed on its node, --instance.")
	flag.StringVar(&opts.PlaceholderImage, "placeholder-image", "afe/controller:dev", "With --per-node, the image of the placeholder Pods: the controller's own (its /manager pause holds the ticket's place).")
	flag.IntVar(&opts.MaxConcurrentReconciles, "max-concurrent-reconciles", 8, "Reconciles run in parallel per kind. They mostly wait on the engine, so more than the cores helps (see make bench).")
	flag.IntVar(&opts.MaxRunsPerSandbox, "max-runs-per-sandbox", controllers.DefaultMaxRunsPerSandbox, "Runs executing in one sandbox at once; more wait Pending (reason RunLimitReached) and start in the order they were created.")
	flag.DurationVar(&opts.ResyncPeriod, "resync-period", 2*time.Minute, "How often every labelled Docker object is listed at once: a loss the event stream missed is repaired, orphans are removed. Ready sandboxes cost no Docker request in between.")
	flag.DurationVar(&opts.UsagePeriod, "usage-period", 0, "How often the CPU, memory, disk and network usage of every sandbox is measured, for the afe_sandbox_* and afe_ticket_* metrics and status.usage: one disk usage request and one list, plus one stats request per running sandbox unless the engine is local (its cgroup files are read then). 0 is --resync-period; less than 30s is 30s; negative turns it off.")
	flag.DurationVar(&opts.FinishedTTL, "finished-ttl", 0, "How long an ended Run and a finished Ticket (its cleanup done) are kept before the controller deletes them, unless they set spec.ttlSecondsAfterFinished; 0 keeps them. Snapshot volumes follow their ticket as always.")
	flag.DurationVar(&opts.DiskCheckPeriod, "disk-check-period", 10*time.Second, "How often the workspaces are measured (one disk usage request for all), while a sandbox has resources.disk: one past its limit is stopped (DiskQuotaExceeded) within about this time. 0 measures them with the usage only.")
	flag.StringVar(&denyGIDs, "deny-gids", "", "Comma-separated gids or group names (of --host-group-file) a sandbox's gid may not be, added to the list that always applies and cannot be shortened: the group owning the engine's socket (a local engine) and the host's groups "+strings.Join(hostgroups.Privileged, ",")+" (those that exist). gid 0 is always refused; a denied gid among the Run groups (2000000000-2099999999) stops the manager.")
	flag.StringVar(&allowedUIDs, "allowed-uids", "", "Comma-separated uids and ranges (1000-65535,70000) a sandbox's user must be in; empty allows any uid but 0.")
	flag.StringVar(&allowedGIDs, "allowed-gids", "", "Comma-separated gids and ranges (1000-65535,70000) a sandbox's group must be in; empty allows any gid but 0 and the denied ones. The groups the controller gives Run commands are its own and not checked against it.")
	flag.StringVar(&sandboxIDRange, "sandbox-id-range", sandboxspec.DefaultSandboxIDs.String(), "The host ids (min-max) the controller gives sandboxes without spec.user: each ticket's sandboxes one uid:gid of its own on the engine (uid = gid), so that the kernel's per-user limits are not shared. It must lie inside --allowed-uids and --allowed-gids and below the Run groups; a spec.user may not name an id in it.")
	flag.StringVar(&runtimes, "runtimes", sandboxspec.DefaultRuntime, "Comma-separated OCI runtimes (by the engine's names) a Sandbox may name in spec.runtime; any other is refused (RuntimeNotAllowed), and a container already running under one not listed is removed, keeping its workspace. gVisor's runsc runs hostile code on a kernel in user space (hack/install-runsc.sh registers it; docs/security.md). A listed runtime the engine lacks is RuntimeUnavailable, retried.")
	flag.StringVar(&defaultRuntime, "default-runtime", sandboxspec.DefaultRuntime, "The runtime of a Sandbox that names none; it must be on --runtimes. A change recreates the containers of those sandboxes under the new one, keeping their workspaces.")
	flag.StringVar(&groupFile, "host-group-file", "/etc/group", "The engine host's group file, where the privileged groups and the names in --deny-gids are looked up; a missing file holds no names (in a Deployment, mount the node's /etc/group).")
	flag.BoolVar(&opts.WorkspaceRootAllowSuid, "workspace-root-allow-suid", false, "Allow Folder workspaces although --workspace-root is not on a file system mounted nosuid,nodev: a setuid program or a device file a workload leaves in its folder then works for the host's users. Without it such a root refuses Folder workspaces (WorkspaceRootUnsafe).")
	flag.BoolVar(&opts.WorkspaceRootShared, "workspace-root-shared", false, "The Docker engine sees --workspace-root at the same path as the controller. Needed for Folder workspaces when the engine is not on a local unix socket (tcp://, ssh://): they are refused otherwise.")
	flag.StringVar(&envPassthrough, "env-passthrough", "", "Comma-separated names of variables of the manager's own environment that a Sandbox may ask for with env[].valueFrom.controllerEnv; any other name is refused (ControllerEnvNotAllowed), and names on the deny list cannot be listed. Nothing else of the manager's environment enters a sandbox.")
	flag.StringVar(&telemetryDB, "telemetry-db", "", "The SQLite file the record of every command executed in a sandbox is kept in (Runs, builtins, execs through the API and on the engine); empty keeps none (the commands are still counted in afe_commands_total).")
	flag.DurationVar(&telemetryOpts.Retention, "telemetry-retention", 30*24*time.Hour, "How long command records are kept; 0 keeps them for ever.")
	flag.Int64Var(&telemetryOpts.MaxBytes, "telemetry-max-bytes", 1<<30, "The most the telemetry database may hold; the oldest records go first. 0: no bound.")
	zapOpts := zap.Options{}
	var accessOpts access.Options
	runLogs := &runlog.Store{}
	flag.Int64Var(&runLogs.Max, "run-log-max", runlog.DefaultMax, "The bytes of a Run's output the manager keeps, its attempts together (kubectl afe logs -f), then cut with a marker; status.output keeps its last 32 KiB either way. 0 keeps none.")
	flag.StringVar(&runLogs.Dir, "run-log-dir", "", "Where the manager keeps the Run logs (never in a workspace); default a folder of the instance under the temporary folder. In a Deployment, a volume.")
	var accessService string
	flag.StringVar(&accessOpts.BindAddress, "access-bind-address", "0", "The address the access API (exec, files, Run logs for kubectl afe, reached through the Kubernetes API server as the aggregated API "+access.APIServiceName+") binds to; port 0 takes a free port; \"0\" disables it.")
	flag.StringVar(&accessOpts.CertDir, "access-cert-dir", "", "A folder with the access API's serving certificate (tls.crt, tls.key) and its CA (ca.crt, put in the APIService); empty makes a CA and a certificate at start.")
	flag.StringVar(&accessService, "access-service", "afe-system/afe-access", "The Service (namespace/name) the access API's APIService points at.")
	var accessPort int
	flag.IntVar(&accessPort, "access-service-port", 443, "The port of the --access-service the APIService names (with --access-external-name, the bound port instead).")
	flag.BoolVar(&accessOpts.Register, "access-register", false, "Write the APIService "+access.APIServiceName+" at start, with the serving CA.")
	flag.Int64Var(&accessOpts.MaxFileBytes, "access-max-file-bytes", access.DefaultMaxFileBytes, "The largest tar one kubectl afe cp may move, either way; a larger one fails before anything is written.")
	flag.StringVar(&accessOpts.ExternalName, "access-external-name", "", "Also write the --access-service as an ExternalName Service to this host at the bound port (\"localhost\" for a local control plane without a cluster network, as make run does).")
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("setup")

	if opts.UsagePeriod > 0 {
		opts.UsagePeriod = max(opts.UsagePeriod, status.MinUsageInterval)
	}
	for _, n := range strings.Split(denyEnv, ",") {
		if n = strings.TrimSpace(n); n != "" {
			opts.DenyEnv = append(opts.DenyEnv, n)
		}
	}

	var err error
	if opts.EnvPassthrough, err = passthrough(envPassthrough, opts.DenyEnv, os.LookupEnv); err != nil {
		log.Error(err, "Invalid --env-passthrough")
		return 1
	}
	log.Info("Environment passed through", "names", sortedNames(opts.EnvPassthrough))

	if opts.EgressSubnets, err = subnets.Parse(egressSubnets); err != nil {
		log.Error(err, "Invalid egress subnets")
		return 1
	}
	if opts.EgressDenyIPs, err = hostaddrs.Parse(egressDenyIPs); err != nil {
		log.Error(err, "Invalid --egress-deny-ips")
		return 1
	}

	ctx := ctrl.SetupSignalHandler()
	engine, err := docker.New(dockerHost)
	if err != nil {
		log.Error(err, "Cannot configure the Docker client")
		return 1
	}
	defer func() { _ = engine.Close() }()
	if err := userPolicy(&opts, engine.Host(), denyGIDs, groupFile, allowedUIDs, allowedGIDs); err != nil {
		log.Error(err, "Invalid sandbox user policy")
		return 1
	}
	if err := sandboxIDs(&opts, sandboxIDRange); err != nil {
		log.Error(err, "Invalid sandbox id range")
		return 1
	}
	if opts.Runtimes, opts.DefaultRuntime, err = sandboxspec.ParseRuntimes(runtimes, defaultRuntime); err != nil {
		log.Error(err, "Invalid runtimes")
		return 1
	}
	for _, name := range opts.Runtimes {
		if rt, err := engine.Runtime(ctx, name); err != nil {
			log.Info("A runtime on --runtimes is not available: its sandboxes wait (RuntimeUnavailable)", "runtime", name, "error", err.Error())
		} else {
			log.Info("Runtime", "name", name, "path", rt.Path, "args", rt.Args, "userSpaceKernel", rt.UserSpaceKernel())
		}
	}
	if err := controllers.CheckEgressSubnets(ctx, engine, opts.EgressSubnets); err != nil {
		log.Error(err, "The egress subnets collide")
		return 1
	}
	log.Info("Sandbox user policy", "denyGIDs", opts.DenyGIDs, "allowedUIDs", opts.AllowedUIDs.String(), "allowedGIDs", opts.AllowedGIDs.String(), "sandboxIDs", opts.SandboxIDs.String())

	restConfig := ctrl.GetConfigOrDie()
	restConfig.QPS, restConfig.Burst = float32(kubeAPIQPS), kubeAPIBurst
	restConfig.Wrap(metrics.CountAPIWrites)
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme: scheme,
		// Of the Pods, the manager reads only the placeholders.
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}: {Label: labels.SelectorFromSet(labels.Set{placement.PlaceholderLabel: "true"})},
		}},
		Metrics:                metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress: probeAddr,
		PprofBindAddress:       pprofAddr,
		LeaderElection:         leaderElect,
		LeaderElectionID:       "afe-controller-" + opts.Instance + ".sandbox.afe.dev",
	})
	if err != nil {
		log.Error(err, "Cannot create the manager")
		return 1
	}

	if telemetryDB != "" {
		store, err := telemetry.Open(telemetryDB, telemetryOpts)
		if err != nil {
			log.Error(err, "Cannot open the telemetry database")
			return 1
		}
		opts.Telemetry, accessOpts.Telemetry = store, store
		// It closes the store (committing what is queued) when the
		// manager stops.
		if err := mgr.Add(&controllers.TelemetryPruner{Store: store, Period: time.Minute, Sandboxes: mgr.GetClient()}); err != nil {
			log.Error(err, "Cannot add the telemetry pruner")
			return 1
		}
		log.Info("Command telemetry", "db", telemetryDB, "retention", telemetryOpts.Retention, "maxBytes", telemetryOpts.MaxBytes)
	}

	if runLogs.Max > 0 {
		explicit := runLogs.Dir != ""
		if !explicit {
			runLogs.Dir = filepath.Join(os.TempDir(), "afe-run-logs-"+opts.Instance)
		}
		switch err := os.MkdirAll(runLogs.Dir, 0o700); {
		case err != nil && explicit:
			log.Error(err, "Cannot make the Run log folder", "dir", runLogs.Dir)
			return 1
		case err != nil:
			// No writable temporary folder (an image from scratch with a
			// read-only root): the manager runs, keeping no Run logs.
			log.Info("No Run logs are kept: the temporary folder is not writable; set --run-log-dir", "dir", runLogs.Dir, "error", err.Error())
		default:
			opts.RunLogs, accessOpts.RunLogs = runLogs, runLogs
		}
	}
	if err := controllers.SetupAll(ctx, mgr, engine, opts); err != nil {
		log.Error(err, "Cannot set up the controllers")
		return 1
	}
	if accessOpts.BindAddress != "0" {
		ns, name, ok := strings.Cut(accessService, "/")
		if !ok || ns == "" || name == "" {
			log.Error(nil, "--access-service must be namespace/name", "value", accessService)
			return 1
		}
		accessOpts.Service = types.NamespacedName{Namespace: ns, Name: name}
		accessOpts.ServicePort = int32(accessPort)
		accessOpts.Instance = opts.Instance
		server, err := access.New(mgr, engine, accessOpts)
		if err != nil {
			log.Error(err, "Cannot set up the access API")
			return 1
		}
		if err := mgr.Add(server); err != nil {
			log.Error(err, "Cannot add the access API")
			return 1
		}
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		log.Error(err, "Cannot add the health check")
		return 1
	}
	if err := mgr.AddReadyzCheck("docker", func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), 3*time.Second)
		defer cancel()
		return engine.Ping(ctx)
	}); err != nil {
		log.Error(err, "Cannot add the readiness check")
		return 1
	}

	log.Info("Starting the manager", "docker", engine.Host(), "instance", opts.Instance)
	if opts.WorkspaceRoot != "" && !engine.IsLocal() && !opts.WorkspaceRootShared {
		log.Info("Folder workspaces are refused: the Docker engine is not on a local unix socket; set --workspace-root-shared if it sees --workspace-root at the same path", "docker", engine.Host())
	}
	if opts.WorkspaceRoot != "" {
		if err := sandboxspec.CheckRootMount(opts.WorkspaceRoot); err != nil && !opts.WorkspaceRootAllowSuid {
			log.Error(err, "Folder workspaces are refused (WorkspaceRootUnsafe) until --workspace-root is mounted nosuid,nodev", "workspaceRoot", opts.WorkspaceRoot)
		} else if err != nil {
			log.Info("Folder workspaces are allowed on a root not mounted nosuid,nodev (--workspace-root-allow-suid)", "workspaceRoot", opts.WorkspaceRoot)
		}
	}
	if err := mgr.Start(ctx); err != nil {
		log.Error(err, "The manager stopped")
		return 1
	}
	return 0
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
