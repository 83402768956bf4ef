package main

import (
	"flag"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"afe.dev/sandbox/access"
	"afe.dev/sandbox/controllers"
	"afe.dev/sandbox/internal/connlimit"
	"afe.dev/sandbox/internal/hostgroups"
	"afe.dev/sandbox/internal/runlog"
	"afe.dev/sandbox/internal/sandboxspec"
	"afe.dev/sandbox/internal/subnets"
	"afe.dev/sandbox/internal/telemetry"
)

// managerFlags are the manager's command line: the options its flags set
// directly, and the raw values that are parsed and checked at start
// (setupOptions, setupPolicy).
type managerFlags struct {
	metricsAddr, probeAddr, pprofAddr string
	leaderElect                       bool
	kubeAPIQPS                        float64
	kubeAPIBurst                      int
	dockerHost                        string
	zap                               zap.Options

	opts           controllers.Options
	denyEnv        string
	envPassthrough string
	egressDenyIPs  string
	egressSubnets  string
	connLimits     connlimit.Limits
	connImage      string

	denyGIDs, groupFile      string
	allowedUIDs, allowedGIDs string
	sandboxIDRange           string
	runtimes, defaultRuntime string

	telemetryDB   string
	telemetryOpts telemetry.Options
	runLogs       runlog.Store

	access        access.Options
	accessService string
	accessPort    int
	peer          access.PeerOptions
}

// bindFlags declares every flag of the manager on fs.
func bindFlags(fs *flag.FlagSet) *managerFlags {
	f := &managerFlags{}
	f.bindManager(fs)
	f.bindSandboxes(fs)
	f.bindPolicy(fs)
	f.bindRecords(fs)
	f.bindAccess(fs)
	f.zap.BindFlags(fs)
	return f
}

// bindManager declares the flags of the manager itself: its endpoints,
// leader election, and the clients of the Kubernetes API and the engine.
func (f *managerFlags) bindManager(fs *flag.FlagSet) {
	fs.Float64Var(&f.kubeAPIQPS, "kube-api-qps", 100, "Requests per second the manager makes to the Kubernetes API at most, sustained (client-go's default of 20 holds a burst of 50 Tickets back).")
	fs.IntVar(&f.kubeAPIBurst, "kube-api-burst", 200, "Requests the manager makes to the Kubernetes API at once at most, above --kube-api-qps.")
	fs.StringVar(&f.metricsAddr, "metrics-bind-address", ":8080", "The address the metrics endpoint binds to; 0 disables it.")
	fs.StringVar(&f.probeAddr, "health-probe-bind-address", ":8081", "The address the health probes bind to.")
	fs.StringVar(&f.pprofAddr, "pprof-bind-address", "0", "The address the pprof endpoints bind to; 0 disables them.")
	fs.BoolVar(&f.leaderElect, "leader-elect", false, "Elect a leader, so that only one manager acts at a time.")
	fs.StringVar(&f.dockerHost, "docker-host", "", "The Docker engine (unix:// or tcp://); default DOCKER_HOST or the local socket. TLS from DOCKER_CERT_PATH and DOCKER_TLS_VERIFY.")
}

// bindSandboxes declares the flags of what the reconcilers make: proxies,
// networks, workspaces, placement, concurrency and periods.
func (f *managerFlags) bindSandboxes(fs *flag.FlagSet) {
	opts := &f.opts
	fs.StringVar(&opts.ProxyImage, "proxy-image", "afe/egress-proxy:dev", "The egress proxy image.")
	fs.StringVar(&opts.EgressNetwork, "egress-network", "bridge", "The network egress proxies reach the outside through.")
	fs.BoolVar(&opts.EgressAllowPrivate, "egress-allow-private", false, "Let egress proxies reach private, loopback and link-local addresses; never the engine host's own (docs/security.md).")
	fs.StringVar(&f.egressDenyIPs, "egress-deny-ips", "", "Comma-separated addresses or CIDRs of the engine's host that egress proxies refuse besides those the manager finds (the gateways of the engine's networks, and the host's interfaces when the manager runs in the host's network namespace): for a remote engine, or a manager in a pod.")
	fs.StringVar(&f.egressSubnets, "egress-subnets", subnets.Default, "Comma-separated IPv4 CIDRs the internal networks of sandboxes with egress get their subnets from, a /29 each (the default holds 16384); they must not overlap the engine's default address pools or the host's routes (checked at start). Empty leaves the subnets to the engine's pools (about 30 networks with its defaults).")
	fs.IntVar(&f.connLimits.Rate, "sandbox-conn-rate", 10, "New connections a second each sandbox (by its address on its network) and each proxy (by its address on --egress-network) may open through the engine host's conntrack table, which every tenant and the engine share; the manager installs the bound with the host's nft, and must then run as root in the engine host's network namespace (make run), or through --sandbox-conn-image. 0 turns the bound off (docs/security.md).")
	fs.StringVar(&f.connImage, "sandbox-conn-image", "", "An image with nft (make images builds afe/nft:dev): the manager installs the conntrack bound through a helper container of it, made through the engine's API on the engine host's network with NET_ADMIN alone (afe-<instance>-conntrack), instead of with its own nft. For a manager that does not run in the engine host's network namespace: the Deployment and the DaemonSet.")
	fs.IntVar(&f.connLimits.Burst, "sandbox-conn-burst", 100, "New connections each sandbox and proxy may open at once above --sandbox-conn-rate.")
	fs.IntVar(&f.connLimits.Max, "sandbox-conn-max", 256, "Connections each sandbox and proxy may hold open at once in the host's conntrack table (closing ones, in TIME_WAIT, are bounded by the rate instead). Each takes at most rate x the host's TIME_WAIT timeout + burst + max entries of the table.")
	fs.StringVar(&opts.WorkspaceRoot, "workspace-root", "", "The host folder Folder workspaces live under, in a folder per namespace (<root>/<namespace>/...); empty refuses Folder workspaces.")
	fs.BoolVar(&opts.WorkspaceRootAllowSuid, "workspace-root-allow-suid", false, "Allow Folder workspaces although --workspace-root is not on a file system mounted nosuid,nodev: a setuid program or a device file a workload leaves in its folder then works for the host's users. Without it such a root refuses Folder workspaces (WorkspaceRootUnsafe).")
	fs.BoolVar(&opts.WorkspaceRootShared, "workspace-root-shared", false, "The Docker engine sees --workspace-root at the same path as the controller. Needed for Folder workspaces when the engine is not on a local unix socket (tcp://, ssh://): they are refused otherwise.")
	fs.StringVar(&opts.Instance, "instance", "default", "The name of this controller instance, the afe.controller label of its Docker objects. With --per-node, the name of this manager's node.")
	fs.BoolVar(&opts.PerNode, "per-node", false, "Run as one manager per node (config/per-node, a DaemonSet): each Ticket gets a placeholder Pod that kube-scheduler places, and this manager acts only on the tickets placed on its node, --instance.")
	fs.StringVar(&opts.PlaceholderImage, "placeholder-image", "afe/controller:dev", "With --per-node, the image of the placeholder Pods: the controller's own (its /manager pause holds the ticket's place).")
	fs.IntVar(&opts.MaxConcurrentReconciles, "max-concurrent-reconciles", 8, "Reconciles run in parallel per kind. They mostly wait on the engine, so more than the cores helps (see make bench).")
	fs.IntVar(&opts.MaxRunsPerSandbox, "max-runs-per-sandbox", controllers.DefaultMaxRunsPerSandbox, "Runs executing in one sandbox at once; more wait Pending (reason RunLimitReached) and start in the order they were created.")
	fs.IntVar(&opts.MaxPoolReplicas, "max-pool-replicas", controllers.DefaultMaxPoolReplicas, "Ready members a SandboxPool keeps on the engine at most, whatever its spec.replicas (per node in per-node mode); 0 keeps none, and every sandbox is created cold.")
	fs.DurationVar(&opts.ResyncPeriod, "resync-period", 2*time.Minute, "How often every labelled Docker object is listed at once: a loss the event stream missed is repaired, orphans are removed. Ready sandboxes cost no Docker request in between.")
	fs.DurationVar(&opts.UsagePeriod, "usage-period", 0, "How often the CPU, memory, disk and network usage of every sandbox is measured, kept in memory for the access API's sandboxusages (kubectl afe top) and the afe_sandbox_* and afe_ticket_* metrics, never written to the API: one disk usage request and one list, plus one stats request per running sandbox unless the engine is local (its cgroup files are read then). 0 is --resync-period; less than 30s is 30s; negative turns it off.")
	fs.DurationVar(&opts.FinishedTTL, "finished-ttl", 0, "How long an ended Run and a finished Ticket (its cleanup done) are kept before the controller deletes them, unless they set spec.ttlSecondsAfterFinished; 0 keeps them. Snapshot volumes follow their ticket as always.")
	fs.Int64Var(&opts.MaxWorkspaceCopyBytes, "max-workspace-copy-bytes", controllers.DefaultMaxWorkspaceCopyBytes, "The most one copy of a workspace may write on this engine: a workspace moved here with its ticket (per-node mode), a restore from a snapshot, a Snapshot Run; each file counts at its full size, since the engine's copies write a sparse file's holes as real disk. A sandbox's resources.disk bounds them further. A copy past it fails before the file that passes it, and nothing of it is kept. 0: only resources.disk bounds them.")
	fs.DurationVar(&opts.DiskCheckPeriod, "disk-check-period", 10*time.Second, "How often the workspaces are measured (one disk usage request for all), while a sandbox has resources.disk or an inode bound (--max-inodes): one past its limit is stopped (DiskQuotaExceeded) within about this time. 0 measures them with the usage only.")
	fs.Int64Var(&opts.MaxInodes, "max-inodes", controllers.DefaultMaxInodes, "Inodes (files, directories, links) a sandbox may hold in its workspace, image volumes and writable layer together, counted every --disk-check-period where the engine's data directory is visible to the controller: the bound of a sandbox without resources.disk or resources.inodes, and the most any sandbox gets (resources.disk gives one per 4Ki of it, at least 65536). One past its bound is stopped (DiskQuotaExceeded). 0: no bound but resources.inodes and resources.disk's.")
}

// bindPolicy declares the flags of what a Sandbox may ask for: its user,
// its runtime and its environment.
func (f *managerFlags) bindPolicy(fs *flag.FlagSet) {
	fs.StringVar(&f.denyEnv, "deny-env", "", "Comma-separated env names refused in sandboxes, added to the built-in list ("+strings.Join(sandboxspec.DefaultDenyEnv, ",")+").")
	fs.StringVar(&f.envPassthrough, "env-passthrough", "", "Comma-separated names of variables of the manager's own environment that a Sandbox may ask for with env[].valueFrom.controllerEnv; any other name is refused (ControllerEnvNotAllowed), and names on the deny list cannot be listed. Nothing else of the manager's environment enters a sandbox.")
	fs.StringVar(&f.denyGIDs, "deny-gids", "", "Comma-separated gids or group names (of --host-group-file) a sandbox's gid may not be, added to the list that always applies and cannot be shortened: the group owning the engine's socket (a local engine) and the host's groups "+strings.Join(hostgroups.Privileged, ",")+" (those that exist). gid 0 is always refused; a denied gid among the Run groups (2000000000-2099999999) stops the manager.")
	fs.StringVar(&f.allowedUIDs, "allowed-uids", "", "Comma-separated uids and ranges (1000-65535,70000) a sandbox's user must be in; empty allows any uid but 0.")
	fs.StringVar(&f.allowedGIDs, "allowed-gids", "", "Comma-separated gids and ranges (1000-65535,70000) a sandbox's group must be in; empty allows any gid but 0 and the denied ones. The groups the controller gives Run commands are its own and not checked against it.")
	fs.StringVar(&f.sandboxIDRange, "sandbox-id-range", sandboxspec.DefaultSandboxIDs.String(), "The host ids (min-max) the controller gives sandboxes without spec.user: each ticket's sandboxes one uid:gid of its own on the engine (uid = gid), so that the kernel's per-user limits are not shared. It must lie inside --allowed-uids and --allowed-gids and below the Run groups; a spec.user may not name an id in it.")
	fs.StringVar(&f.runtimes, "runtimes", sandboxspec.DefaultRuntime, "Comma-separated OCI runtimes (by the engine's names) a Sandbox may name in spec.runtime; any other is refused (RuntimeNotAllowed), and a container already running under one not listed is removed, keeping its workspace. gVisor's runsc runs hostile code on a kernel in user space (hack/install-runsc.sh registers it; docs/security.md). A listed runtime the engine lacks is RuntimeUnavailable, retried.")
	fs.StringVar(&f.defaultRuntime, "default-runtime", sandboxspec.DefaultRuntime, "The runtime of a Sandbox that names none; it must be on --runtimes. A change recreates the containers of those sandboxes under the new one, keeping their workspaces.")
	fs.StringVar(&f.groupFile, "host-group-file", "/etc/group", "The engine host's group file, where the privileged groups and the names in --deny-gids are looked up; a missing file holds no names (in a Deployment, mount the node's /etc/group).")
}

// bindRecords declares the flags of what the manager keeps of the
// commands: the telemetry database and the Run logs.
func (f *managerFlags) bindRecords(fs *flag.FlagSet) {
	fs.StringVar(&f.telemetryDB, "telemetry-db", "", "The SQLite file the record of every command executed in a sandbox is kept in (Runs, builtins, execs through the API and on the engine); empty keeps none (the commands are still counted in afe_commands_total).")
	fs.DurationVar(&f.telemetryOpts.Retention, "telemetry-retention", 30*24*time.Hour, "How long command records are kept; 0 keeps them for ever.")
	fs.Int64Var(&f.telemetryOpts.MaxBytes, "telemetry-max-bytes", 1<<30, "The most the telemetry database may hold. Past it, records go from the namespaces that hold the most of a kind (commands, egress decisions), their oldest first, never from one that holds less than its share. 0: no bound.")
	fs.Int64Var(&f.telemetryOpts.NamespaceMaxRecords, "telemetry-namespace-max-records", 500000, "The most records of each kind (commands, egress decisions) the telemetry keeps of one namespace; its oldest go first. 0: no bound.")
	fs.Int64Var(&f.runLogs.Max, "run-log-max", runlog.DefaultMax, "The bytes of a Run's output the manager keeps, its attempts together (kubectl afe logs -f), then cut with a marker; status.output keeps its last 32 KiB either way. 0 keeps none.")
	fs.StringVar(&f.runLogs.Dir, "run-log-dir", "", "Where the manager keeps the Run logs (never in a workspace); default a folder of the instance under the temporary folder. In a Deployment, a volume.")
}

// bindAccess declares the flags of the access API (kubectl afe).
func (f *managerFlags) bindAccess(fs *flag.FlagSet) {
	fs.StringVar(&f.access.BindAddress, "access-bind-address", "0", "The address the access API (exec, files, Run logs for kubectl afe, reached through the Kubernetes API server as the aggregated API "+access.APIServiceName+") binds to; port 0 takes a free port; \"0\" disables it.")
	fs.StringVar(&f.access.CertDir, "access-cert-dir", "", "A folder with the access API's serving certificate (tls.crt, tls.key) and its CA (ca.crt, put in the APIService); empty makes a CA and a certificate at start.")
	fs.StringVar(&f.accessService, "access-service", "afe-system/afe-access", "The Service (namespace/name) the access API's APIService points at.")
	fs.IntVar(&f.accessPort, "access-service-port", 443, "The port of the --access-service the APIService names (with --access-external-name, the bound port instead).")
	fs.BoolVar(&f.access.Register, "access-register", false, "Write the APIService "+access.APIServiceName+" at start, with the serving CA.")
	fs.Int64Var(&f.access.MaxFileBytes, "access-max-file-bytes", access.DefaultMaxFileBytes, "The largest tar one kubectl afe cp may move, either way; a larger one fails before anything is written.")
	fs.StringVar(&f.peer.BindAddress, "peer-bind-address", "0", "With --per-node, the address the listener for the other managers binds to: a request of the access API about another node's sandbox is forwarded to that node's manager over TLS with certificates of a CA the managers share (the Secret "+peerCASecret+" in the --access-service's namespace, made and rotated by the managers); \"0\" forwards nothing, and only this node's sandboxes are served.")
	fs.StringVar(&f.peer.AdvertiseAddress, "peer-advertise-address", "", "The host:port the other managers reach --peer-bind-address at (in a DaemonSet, $(POD_IP):port); empty is the bound address, which must then name a host.")
	fs.StringVar(&f.access.ExternalName, "access-external-name", "", "Also write the --access-service as an ExternalName Service to this host at the bound port (\"localhost\" for a local control plane without a cluster network, as make run does).")
}
