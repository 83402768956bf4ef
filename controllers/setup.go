package controllers

import (
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"

	"afe.dev/sandbox/docker"
)

// SetupAll registers every reconciler and the Docker event source with the
// manager.
func SetupAll(mgr ctrl.Manager, engine docker.Engine, opts Options) error {
	events := NewDockerEventSource(engine, mgr.GetClient(), opts.Instance)
	if err := mgr.Add(events); err != nil {
		return fmt.Errorf("add docker event source: %w", err)
	}
	sandboxes := &SandboxReconciler{
		Client:       mgr.GetClient(),
		APIReader:    mgr.GetAPIReader(),
		Engine:       engine,
		Recorder:     mgr.GetEventRecorder("afe-sandbox-controller"),
		Options:      opts,
		DockerEvents: events.Out,
	}
	if err := sandboxes.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up sandbox controller: %w", err)
	}
	return nil
}
