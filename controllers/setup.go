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

	"afe.dev/sandbox/controllers/loops"
	"afe.dev/sandbox/controllers/run"
	"afe.dev/sandbox/controllers/sandbox"
	"afe.dev/sandbox/controllers/shared"
	"afe.dev/sandbox/controllers/ticket"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/runlog"
	"afe.dev/sandbox/internal/status"
)

// Options are the controller settings that come from the manager's flags.
type Options = shared.Options

// DefaultMaxRunsPerSandbox is --max-runs-per-sandbox when unset.
const DefaultMaxRunsPerSandbox = shared.DefaultMaxRunsPerSandbox

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

// SetupAll registers every reconciler and the Docker event source with the
// manager.
// ctx bounds the Runs executed by this process: they end with it.
func SetupAll(ctx context.Context, mgr ctrl.Manager, engine Engine, opts Options) error {
	// Only an engine on a local unix socket is known to see the controller's
	// folders at the same paths.
	cfg := shared.Config{Options: opts, EngineRemote: !engine.IsLocal()}
	events := loops.NewDockerEventSource(engine, mgr.GetClient(), opts.Instance, opts.Telemetry)
	if err := mgr.Add(events); err != nil {
		return fmt.Errorf("add docker event source: %w", err)
	}
	hostAddrs := &loops.HostAddresses{Engine: engine, Events: engine, Inputs: cfg.HostAddressInputs(), Changed: loops.EnqueueEgress(mgr.GetClient(), events.Enqueue)}
	if err := mgr.Add(hostAddrs); err != nil {
		return fmt.Errorf("add host address watch: %w", err)
	}
	stops := &shared.StopLog{}
	sandboxes := &sandbox.Reconciler{
		Client:       mgr.GetClient(),
		APIReader:    mgr.GetAPIReader(),
		Engine:       engine,
		Recorder:     mgr.GetEventRecorder("afe-sandbox-controller"),
		Config:       cfg,
		DockerEvents: events.Out,
		Activity:     events.Activity,
		Stops:        stops,
		Disk:         &shared.DiskMeter{},
		HostAddrs:    hostAddrs,
	}
	if err := sandboxes.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up sandbox controller: %w", err)
	}
	period := opts.SweepPeriod
	if period <= 0 {
		period = max(opts.ResyncPeriod, 10*time.Second)
	}
	sweeper := &loops.Sweeper{Client: mgr.GetClient(), Cache: mgr.GetCache(), Engine: engine, Instance: opts.Instance,
		Period: period, Enqueue: events.Enqueue}
	if err := mgr.Add(sweeper); err != nil {
		return fmt.Errorf("add sweeper: %w", err)
	}
	tickets := &ticket.Reconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorder("afe-ticket-controller"),
		Options:   opts,
		Leftovers: sweeper,
	}
	if err := tickets.SetupWithManager(ctx, mgr); err != nil {
		return fmt.Errorf("set up ticket controller: %w", err)
	}
	// The collector also measures the workspaces for resources.disk, even
	// with the usage turned off.
	collector := &loops.UsageCollector{Client: mgr.GetClient(), Cache: mgr.GetCache(), Engine: engine, Instance: opts.Instance,
		Period: usagePeriod(opts), Disk: sandboxes.Disk, DiskPeriod: diskCheckPeriod(opts), Enqueue: events.Enqueue}
	if err := mgr.Add(collector); err != nil {
		return fmt.Errorf("add usage collector: %w", err)
	}
	runs := &run.Reconciler{
		Client:   mgr.GetClient(),
		Engine:   engine,
		Recorder: mgr.GetEventRecorder("afe-run-controller"),
		Config:   cfg,
		Stops:    stops,
	}
	if err := runs.SetupWithManager(ctx, mgr); err != nil {
		return fmt.Errorf("set up run controller: %w", err)
	}
	if opts.RunLogs != nil {
		if err := mgr.Add(&runlog.Sweeper{Store: opts.RunLogs, Client: mgr.GetClient(), Period: time.Minute}); err != nil {
			return fmt.Errorf("add run log sweeper: %w", err)
		}
	}
	return nil
}

// usagePeriod is how often usage is measured; zero or less is never.
func usagePeriod(o Options) time.Duration {
	switch {
	case o.UsagePeriod < 0:
		return 0
	case o.UsagePeriod == 0:
		return max(o.ResyncPeriod, status.MinUsageInterval)
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
	return max(o.ResyncPeriod, status.MinUsageInterval)
}
