package controllers

import (
	"context"
	"fmt"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/runlog"
	"afe.dev/sandbox/internal/status"
)

// SetupAll registers every reconciler and the Docker event source with the
// manager.
// ctx bounds the Runs executed by this process: they end with it.
func SetupAll(ctx context.Context, mgr ctrl.Manager, engine docker.Engine, opts Options) error {
	// Only an engine on a local unix socket is known to see the controller's
	// folders at the same paths.
	if l, ok := engine.(interface{ IsLocal() bool }); !ok || !l.IsLocal() {
		opts.EngineRemote = true
	}
	events := NewDockerEventSource(engine, mgr.GetClient(), opts.Instance)
	events.execs = newEngineExecs(engine, opts.Telemetry, opts.Instance, events.sandboxOf)
	if err := mgr.Add(events); err != nil {
		return fmt.Errorf("add docker event source: %w", err)
	}
	hostAddrs := &HostAddresses{Engine: engine, Inputs: opts.hostAddressInputs(), Changed: enqueueEgress(mgr.GetClient(), events.enqueue)}
	if err := mgr.Add(hostAddrs); err != nil {
		return fmt.Errorf("add host address watch: %w", err)
	}
	stops := &StopLog{}
	sandboxes := &SandboxReconciler{
		Client:       mgr.GetClient(),
		APIReader:    mgr.GetAPIReader(),
		Engine:       engine,
		Recorder:     mgr.GetEventRecorder("afe-sandbox-controller"),
		Options:      opts,
		DockerEvents: events.Out,
		Activity:     events.Activity,
		Stops:        stops,
		Disk:         &DiskMeter{},
		HostAddrs:    hostAddrs,
	}
	if err := sandboxes.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up sandbox controller: %w", err)
	}
	tickets := &TicketReconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Engine:    engine,
		Recorder:  mgr.GetEventRecorder("afe-ticket-controller"),
		Options:   opts,
	}
	if err := tickets.SetupWithManager(ctx, mgr); err != nil {
		return fmt.Errorf("set up ticket controller: %w", err)
	}
	period := opts.SweepPeriod
	if period <= 0 {
		period = max(opts.ResyncPeriod, 10*time.Second)
	}
	sweeper := &Sweeper{Client: mgr.GetClient(), Cache: mgr.GetCache(), Engine: engine, Instance: opts.Instance,
		Period: period, Enqueue: events.enqueue}
	if err := mgr.Add(sweeper); err != nil {
		return fmt.Errorf("add sweeper: %w", err)
	}
	// The collector also measures the workspaces for resources.disk, even
	// with the usage turned off.
	collector := &UsageCollector{Client: mgr.GetClient(), Cache: mgr.GetCache(), Engine: engine, Instance: opts.Instance,
		Period: opts.usagePeriod(), Disk: sandboxes.Disk, DiskPeriod: opts.diskCheckPeriod(), Enqueue: events.enqueue}
	if err := mgr.Add(collector); err != nil {
		return fmt.Errorf("add usage collector: %w", err)
	}
	runs := &RunReconciler{
		Client:   mgr.GetClient(),
		Engine:   engine,
		Recorder: mgr.GetEventRecorder("afe-run-controller"),
		Options:  opts,
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
func (o Options) usagePeriod() time.Duration {
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
func (o Options) diskCheckPeriod() time.Duration {
	if o.DiskCheckPeriod > 0 {
		return o.DiskCheckPeriod
	}
	if o.usagePeriod() > 0 {
		return 0
	}
	return max(o.ResyncPeriod, status.MinUsageInterval)
}
