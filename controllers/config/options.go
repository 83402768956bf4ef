// Package config holds the controller's settings: Options, as the
// manager's flags set them, and Config, the Options with what SetupAll
// learnt of the engine, which the reconcilers and the loops judge specs
// by; with what the settings derive (the validation options, the env
// resolver, the bound of a workspace copy).
package config

import (
	"fmt"
	"net/netip"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/connlimit"
	"afe.dev/sandbox/internal/hostaddrs"
	"afe.dev/sandbox/internal/hostgroups"
	"afe.dev/sandbox/internal/placement"
	"afe.dev/sandbox/internal/runlog"
	"afe.dev/sandbox/internal/sandboxenv"
	"afe.dev/sandbox/internal/sandboxspec"
	"afe.dev/sandbox/internal/telemetry"
	"afe.dev/sandbox/internal/usage"
	"afe.dev/sandbox/move"
)

// Options are the controller settings that come from the manager's flags.
type Options struct {
	// Instance is --instance: the value of the afe.controller label.
	Instance string
	// RunLogs keeps the whole output of each Run attempt (--run-log-dir,
	// --run-log-max); nil keeps none.
	RunLogs *runlog.Store
	// WorkspaceRoot is --workspace-root; empty refuses Folder workspaces.
	WorkspaceRoot string
	// DenyEnv are refused env names besides the built-in ones.
	DenyEnv []string
	// ProxyImage is the egress proxy image.
	ProxyImage string
	// EgressNetwork is the network proxies reach the outside through.
	EgressNetwork string
	// EgressAllowPrivate lets proxies reach private addresses; never the
	// engine host's (HostAddresses).
	EgressAllowPrivate bool
	// EgressDenyIPs is --egress-deny-ips: more addresses of the engine's
	// host every proxy refuses, for those the manager cannot see (a remote
	// engine, or a manager outside the host's network namespace).
	EgressDenyIPs []netip.Prefix
	// ConnLimits bounds what each sandbox network and proxy takes of the
	// engine host's conntrack table (--sandbox-conn-rate, -burst, -max),
	// installed at start; nil: no bound.
	ConnLimits *connlimit.Host
	// EgressSubnets is --egress-subnets: the ranges the sandboxes' internal
	// networks get their /29 subnets from. Empty leaves the choice to the
	// engine's default address pools.
	EgressSubnets []netip.Prefix
	// ResyncPeriod is how often every labelled Docker object is listed, to
	// catch a loss the event stream missed and to sweep orphans.
	ResyncPeriod time.Duration
	// MaxConcurrentReconciles bounds parallel reconciles per kind.
	MaxConcurrentReconciles int
	// SweepPeriod overrides ResyncPeriod for the sweep (tests use a short one).
	SweepPeriod time.Duration
	// UsagePeriod is --usage-period: how often the usage of every sandbox
	// is measured. Zero is ResyncPeriod, but at least usage.MinPeriod;
	// negative turns the measuring off. The manager never passes less than
	// usage.MinPeriod (tests do).
	UsagePeriod time.Duration
	// Usage keeps the latest measurement, which the access API serves
	// (nil: it is kept nowhere, and only the metrics report it).
	Usage *usage.Store
	// DiskCheckPeriod is --disk-check-period: how often the workspaces are
	// measured between two usage measurements, while a sandbox has
	// resources.disk (zero: only with the usage).
	DiskCheckPeriod time.Duration
	// MaxInodes is --max-inodes: the inode bound of a sandbox without
	// resources.disk or resources.inodes, and the most any sandbox gets
	// (sandboxspec.InodeBound); zero for none.
	MaxInodes int64
	// FinishedTTL is --finished-ttl: how long an ended Run or a finished
	// Ticket is kept when it does not set ttlSecondsAfterFinished; zero
	// keeps them.
	FinishedTTL time.Duration
	// MaxRunsPerSandbox is --max-runs-per-sandbox: how many Runs execute in
	// one sandbox at once (0: DefaultMaxRunsPerSandbox).
	MaxRunsPerSandbox int
	// MaxPoolReplicas is --max-pool-replicas: the most ready members a
	// SandboxPool keeps on an engine, whatever its spec.replicas; 0 keeps
	// none (every sandbox is created cold). The manager's default is
	// DefaultMaxPoolReplicas.
	MaxPoolReplicas int
	// DenyGIDs are gids a sandbox's user may not have: the group of the
	// engine's socket, the host's privileged groups and --deny-gids. Nil
	// denies none but those sandboxspec always refuses.
	DenyGIDs *hostgroups.DenyList
	// AllowedUIDs and AllowedGIDs are --allowed-uids and --allowed-gids;
	// empty allows any.
	AllowedUIDs sandboxspec.IDRanges
	AllowedGIDs sandboxspec.IDRanges
	// SandboxIDs is --sandbox-id-range: the host ids given to sandboxes
	// without spec.user (zero: sandboxspec.DefaultSandboxIDs).
	SandboxIDs sandboxspec.IDRange
	// WorkspaceRootShared is --workspace-root-shared: a remote engine sees
	// WorkspaceRoot at the same path as the controller.
	WorkspaceRootShared bool
	// WorkspaceRootAllowSuid is --workspace-root-allow-suid: Folder
	// workspaces are allowed although the root's file system is not
	// mounted nosuid,nodev (the operator accepts the risk).
	WorkspaceRootAllowSuid bool
	// EnvPassthrough is --env-passthrough: each listed name with its value
	// in the manager's environment as it started (nil when unset). No
	// other variable of that environment is kept.
	EnvPassthrough map[string]*string
	// Telemetry keeps the record of every command executed in a sandbox
	// (nil: none is kept; the commands are still counted).
	Telemetry *telemetry.Store
	// Executions are the commands the controller executes in each sandbox,
	// by time: the egress records name those running at each request
	// (nil: none are named).
	Executions *telemetry.Executions
	// PerNode is --per-node: this manager is one of one per node, its node
	// the Instance; it acts only on the tickets kube-scheduler placed on
	// its node (through their placeholder Pods).
	PerNode bool
	// Moves, in per-node mode with the managers' peer channel
	// (--peer-bind-address), moves a drained ticket's sandboxes with their
	// workspaces (NodeDrained); nil releases it, and its sandboxes start
	// afresh where it is placed next (NodeLost).
	Moves move.Mover
	// PlaceholderImage is --placeholder-image: the image of the placeholder
	// Pods (the controller's own, which pauses).
	PlaceholderImage string
	// PlacementKey, in per-node mode, is the managers' key (the Secret
	// placement.KeySecret): they sign the placeholders they make with it,
	// and trust the binding of no other Pod.
	PlacementKey placement.Key
	// Runtimes is --runtimes: the OCI runtimes a sandbox may run under
	// (empty: runc only); DefaultRuntime is --default-runtime, that of a
	// sandbox that names none (empty: runc).
	Runtimes       []string
	DefaultRuntime string
	// MaxWorkspaceCopyBytes is --max-workspace-copy-bytes: the most any
	// copy of a workspace may write (a move, a restore, a snapshot), each
	// file at its full size, besides the sandbox's resources.disk; 0 leaves
	// resources.disk alone to bound them (CopyBytes).
	MaxWorkspaceCopyBytes int64
}

// MaxRunsPerSandboxOrDefault is MaxRunsPerSandbox, or its default.
func (o Options) MaxRunsPerSandboxOrDefault() int {
	if o.MaxRunsPerSandbox <= 0 {
		return DefaultMaxRunsPerSandbox
	}
	return o.MaxRunsPerSandbox
}

// Config is what the Sandbox and Run reconcilers judge specs by: the
// Options as the flags set them, and what SetupAll learnt of the engine.
type Config struct {
	Options
	// EngineRemote is true when the engine is not on a local unix socket.
	// Folder workspaces are then refused unless WorkspaceRootShared.
	EngineRemote bool
}

// Workspaces is the settings Folder workspaces are judged by.
func (o Config) Workspaces() sandboxspec.Options {
	return sandboxspec.Options{WorkspaceRoot: o.WorkspaceRoot,
		EngineRemote: o.EngineRemote, WorkspaceRootShared: o.WorkspaceRootShared,
		WorkspaceRootAllowSuid: o.WorkspaceRootAllowSuid}
}

// Validation is the settings validation depends on. It fails, as the engine
// being unavailable, while the group of the engine's socket is unknown: no
// sandbox user can be judged without it.
func (o Config) Validation() (sandboxspec.Options, error) {
	deny, err := o.DenyGIDs.GIDs()
	if err != nil {
		return sandboxspec.Options{}, fmt.Errorf("%w: %w", docker.ErrUnavailable, err)
	}
	v := o.Workspaces()
	v.DenyEnv, v.DenyGIDs, v.AllowedUIDs, v.AllowedGIDs = o.DenyEnv, deny, o.AllowedUIDs, o.AllowedGIDs
	v.SandboxIDs = o.SandboxIDs
	v.Runtimes, v.DefaultRuntime = o.Runtimes, o.DefaultRuntime
	v.Passthrough = sandboxspec.PassthroughSet(o.EnvPassthrough)
	return v, nil
}

// EnvResolver resolves a sandbox's declared env with these settings,
// reading Secrets with reader, which must be the manager's API reader (no
// Secret is ever cached).
func (o Options) EnvResolver(reader client.Reader) sandboxenv.Resolver {
	return sandboxenv.Resolver{Reader: reader, DenyEnv: o.DenyEnv, Passthrough: o.EnvPassthrough}
}

// DefaultMaxRunsPerSandbox is --max-runs-per-sandbox when unset.
const DefaultMaxRunsPerSandbox = 16

// DefaultMaxWorkspaceCopyBytes is --max-workspace-copy-bytes when unset:
// 10 GiB.
const DefaultMaxWorkspaceCopyBytes = 10 << 30

// DefaultMaxPoolReplicas is --max-pool-replicas when unset.
const DefaultMaxPoolReplicas = 50

// HostAddressInputs are the settings of the list of the host's addresses.
func (o Config) HostAddressInputs() hostaddrs.Inputs {
	return hostaddrs.Inputs{LocalEngine: !o.EngineRemote, Extra: o.EgressDenyIPs, AllowPrivate: o.EgressAllowPrivate}
}
