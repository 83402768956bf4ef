// Package controllers wires the reconcilers of the sandbox.afe.dev API
// (one package per kind: sandbox, ticket, run) and the background loops
// (package loops) into a manager. docs/architecture.md maps the packages.
package controllers

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/controllers/config"
	"afe.dev/sandbox/controllers/disklimit"
	"afe.dev/sandbox/controllers/egressnet"
	"afe.dev/sandbox/controllers/hostids"
	"afe.dev/sandbox/controllers/loops"
	"afe.dev/sandbox/controllers/pool"
	"afe.dev/sandbox/controllers/run"
	"afe.dev/sandbox/controllers/sandbox"
	"afe.dev/sandbox/controllers/ticket"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/placement"
	"afe.dev/sandbox/internal/poolsync"
	"afe.dev/sandbox/internal/runlog"
	"afe.dev/sandbox/internal/stoplog"
	"afe.dev/sandbox/internal/usage"
)

// Options are the controller settings that come from the manager's flags.
type Options = config.Options

// DefaultMaxRunsPerSandbox is --max-runs-per-sandbox when unset.
const DefaultMaxRunsPerSandbox = config.DefaultMaxRunsPerSandbox

// DefaultMaxWorkspaceCopyBytes is --max-workspace-copy-bytes when unset.
const DefaultMaxWorkspaceCopyBytes = config.DefaultMaxWorkspaceCopyBytes

// DefaultMaxPoolReplicas is --max-pool-replicas when unset.
const DefaultMaxPoolReplicas = config.DefaultMaxPoolReplicas

// DefaultMaxInodes is --max-inodes when unset: 1Mi inodes, about a
// sixteenth of an ext4 filesystem of 256 GiB at its default ratio (this
// project's engine host holds 16,777,216).
const DefaultMaxInodes = 1 << 20

// TelemetryPruner applies the telemetry's retention every Period.
type TelemetryPruner = loops.TelemetryPruner

// AddressPools is what CheckEgressSubnets asks of the engine.
type AddressPools = sandbox.AddressPools

// CheckEgressSubnets is sandbox.CheckEgressSubnets: it fails when
// --egress-subnets overlaps the engine's default address pools or, for an
// engine on this host, one of the host's routes.
func CheckEgressSubnets(ctx context.Context, engine AddressPools, ranges []netip.Prefix) error {
	return sandbox.CheckEgressSubnets(ctx, engine, ranges)
}

// Engine is the Docker engine the manager drives, with what SetupAll must
// know of it rather than guess.
type Engine interface {
	docker.Engine
	// IsLocal is true when the engine is reached through a local socket.
	IsLocal() bool
	// NetworkEvents says when the engine's networks come and go (the host
	// address watch).
	NetworkEvents(ctx context.Context) (<-chan docker.Event, <-chan error)
}

// SetupAll registers every reconciler and the background loops that feed
// them (the Docker event source among them) with the manager.
// ctx bounds the Runs executed by this process: they end with it.
func SetupAll(ctx context.Context, mgr ctrl.Manager, engine Engine, opts Options) error {
	// Only an engine on a local unix socket is known to see the controller's
	// folders at the same paths.
	cfg := config.Config{Options: opts, EngineRemote: !engine.IsLocal()}
	bg, err := addLoops(mgr, engine, cfg)
	if err != nil {
		return err
	}
	return addReconcilers(ctx, mgr, engine, cfg, bg)
}

// background are the loops the reconcilers are given.
type background struct {
	events    *loops.DockerEventSource
	hostAddrs *loops.HostAddresses
	sweeper   *loops.Sweeper
	disk      *disklimit.Meter
}

// addLoops adds the background loops to the manager.
func addLoops(mgr ctrl.Manager, engine Engine, cfg config.Config) (*background, error) {
	c, opts := mgr.GetClient(), cfg.Options
	events := loops.NewDockerEventSource(engine, c, opts.Instance, opts.Telemetry)
	bg := &background{events: events, disk: &disklimit.Meter{MaxInodes: opts.MaxInodes},
		hostAddrs: &loops.HostAddresses{Engine: engine, Events: engine, Inputs: cfg.HostAddressInputs(), Changed: loops.EnqueueEgress(c, events.Enqueue)}}
	period := opts.SweepPeriod
	if period <= 0 {
		period = max(opts.ResyncPeriod, 10*time.Second)
	}
	bg.sweeper = &loops.Sweeper{Client: c, Cache: mgr.GetCache(), Engine: engine, Instance: opts.Instance,
		Period: period, Enqueue: events.Enqueue, EnqueuePool: events.EnqueuePool,
		ConnLimits: opts.ConnLimits, EgressNetwork: opts.EgressNetwork}
	if opts.PerNode {
		bg.sweeper.Here = func(ctx context.Context, sbx *afev1.Sandbox) bool {
			here, _, err := placement.SandboxHere(ctx, c, opts.Instance, opts.PlacementKey, sbx)
			return here || err != nil // what cannot be read is looked at
		}
	}
	// The collector also measures the workspaces for resources.disk, even
	// with the usage turned off.
	collector := &loops.UsageCollector{Client: c, Cache: mgr.GetCache(), Engine: engine, Instance: opts.Instance,
		Period: usagePeriod(opts), Disk: bg.disk, DiskPeriod: diskCheckPeriod(opts), Enqueue: events.Enqueue, Telemetry: opts.Telemetry,
		Store: opts.Usage, Elected: mgr.Elected()}
	type named struct {
		what string
		r    manager.Runnable
	}
	runnables := []named{{"docker event source", events}, {"host address watch", bg.hostAddrs},
		{"sweeper", bg.sweeper}, {"usage collector", collector}}
	// The egress proxies' decisions go where the commands go; an engine
	// that cannot follow logs (the fake engine of the fast tests) has none.
	if follow, ok := engine.(loops.EgressEngine); ok && opts.Telemetry != nil {
		runnables = append(runnables, named{"egress follower", loops.NewEgressFollower(follow, engine, c, opts.Instance, opts.Telemetry, opts.Executions,
			mgr.GetEventRecorder("afe-sandbox-controller"))})
	}
	if opts.RunLogs != nil {
		runnables = append(runnables, named{"run log sweeper", &runlog.Sweeper{Store: opts.RunLogs, Client: c, Period: time.Minute}})
	}
	for _, n := range runnables {
		if err := mgr.Add(n.r); err != nil {
			return nil, fmt.Errorf("add %s: %w", n.what, err)
		}
	}
	return bg, nil
}

// addReconcilers sets up the reconciler of each kind with the manager.
func addReconcilers(ctx context.Context, mgr ctrl.Manager, engine Engine, cfg config.Config, bg *background) error {
	stops := &stoplog.Log{}
	// What the Sandbox and SandboxPool reconcilers share: the host ids
	// being given, the turns of each pool, the cold creations in flight
	// that the refill makes room for, and the claims and misses counted for
	// the pools' status; the subnets of the internal networks being made;
	// and the manager's disk probe.
	ids, probe, turns, cold, counts := &hostids.Allocator{}, &disklimit.Probe{}, &poolsync.Turns{}, &poolsync.InFlight{}, &poolsync.Counts{}
	sandboxes := &sandbox.Reconciler{
		Client:       mgr.GetClient(),
		APIReader:    mgr.GetAPIReader(),
		Engine:       engine,
		Recorder:     mgr.GetEventRecorder("afe-sandbox-controller"),
		Config:       cfg,
		DockerEvents: bg.events.Out,
		Activity:     bg.events.Activity,
		Stops:        stops,
		Disk:         bg.disk,
		HostAddrs:    bg.hostAddrs,
		IDs:          ids,
		Probe:        probe,
		Cold:         cold,
		Claims:       &poolsync.InFlight{},
		Turns:        turns,
		PoolCounts:   counts,
		EnqueuePool:  bg.events.EnqueuePool,
		Subnets:      &egressnet.Subnets{},
	}
	if err := sandboxes.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up sandbox controller: %w", err)
	}
	if err := addPools(ctx, mgr, engine, cfg, bg, sandboxes); err != nil {
		return err
	}
	tickets := &ticket.Reconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorder("afe-ticket-controller"),
		Options:   cfg.Options,
		Leftovers: bg.sweeper,
	}
	if err := tickets.SetupWithManager(ctx, mgr); err != nil {
		return fmt.Errorf("set up ticket controller: %w", err)
	}
	runs := &run.Reconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Engine:    engine,
		Recorder:  mgr.GetEventRecorder("afe-run-controller"),
		Config:    cfg,
		Stops:     stops,
	}
	if err := runs.SetupWithManager(ctx, mgr); err != nil {
		return fmt.Errorf("set up run controller: %w", err)
	}
	return nil
}

// addPools sets up the SandboxPool reconciler, which shares with the
// Sandbox reconciler what sandboxes says: the host ids, the pools' turns,
// the cold creations in flight, the counts of claims, the subnets and the
// disk probe.
func addPools(ctx context.Context, mgr ctrl.Manager, engine Engine, cfg config.Config, bg *background, sandboxes *sandbox.Reconciler) error {
	pools := &pool.Reconciler{
		Client:       mgr.GetClient(),
		APIReader:    mgr.GetAPIReader(),
		Engine:       engine,
		Recorder:     mgr.GetEventRecorder("afe-pool-controller"),
		Config:       cfg,
		IDs:          sandboxes.IDs,
		Turns:        sandboxes.Turns,
		Cold:         sandboxes.Cold,
		Claims:       sandboxes.Claims,
		Counts:       sandboxes.PoolCounts,
		Subnets:      sandboxes.Subnets,
		Probe:        sandboxes.Probe,
		MemberEvents: bg.events.Pools,
	}
	if err := pools.SetupWithManager(ctx, mgr); err != nil {
		return fmt.Errorf("set up sandbox pool controller: %w", err)
	}
	return nil
}

// usagePeriod is how often usage is measured; zero or less is never.
func usagePeriod(o Options) time.Duration {
	switch {
	case o.UsagePeriod < 0:
		return 0
	case o.UsagePeriod == 0:
		return max(o.ResyncPeriod, usage.MinPeriod)
	}
	return o.UsagePeriod
}

// diskCheckPeriod is how often workspaces are measured for disk limits: with
// the usage when DiskCheckPeriod is zero, and then every resync period
// should the usage be off.
func diskCheckPeriod(o Options) time.Duration {
	if o.DiskCheckPeriod > 0 {
		return o.DiskCheckPeriod
	}
	if usagePeriod(o) > 0 {
		return 0
	}
	return max(o.ResyncPeriod, usage.MinPeriod)
}
