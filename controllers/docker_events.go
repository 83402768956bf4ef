package controllers

import (
	"context"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/docker"
)

// DockerEventSource turns the engine's container events into reconcile
// requests for the Sandbox the container belongs to. It reconnects when the
// stream breaks (an engine restart, say) and then asks every Sandbox to be
// looked at again, since events may have been missed meanwhile.
type DockerEventSource struct {
	Engine   docker.Engine
	Client   client.Reader
	Instance string
	// Out receives one event per affected Sandbox.
	Out chan event.TypedGenericEvent[*afev1.Sandbox]
}

// NewDockerEventSource returns a source with its output channel.
func NewDockerEventSource(engine docker.Engine, c client.Reader, instance string) *DockerEventSource {
	return &DockerEventSource{Engine: engine, Client: c, Instance: instance, Out: make(chan event.TypedGenericEvent[*afev1.Sandbox], 1024)}
}

// NeedLeaderElection is true: only the leader acts on events.
func (d *DockerEventSource) NeedLeaderElection() bool { return true }

// Start streams events until ctx ends.
func (d *DockerEventSource) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("docker-events")
	backoff := time.Second
	connected := false
	for ctx.Err() == nil {
		events, errs := d.Engine.Events(ctx, map[string]string{afev1.LabelController: d.Instance})
		if connected {
			// Reconnected: whatever happened while disconnected is unknown.
			d.resyncAll(ctx)
		}
		connected = true
		err := d.pump(events, errs, &backoff)
		if ctx.Err() != nil {
			return nil
		}
		log.Info("Docker event stream broke; reconnecting", "error", err.Error(), "after", backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
	return nil
}

func (d *DockerEventSource) pump(events <-chan docker.Event, errs <-chan error, backoff *time.Duration) error {
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return <-errs
			}
			*backoff = time.Second
			switch ev.Action {
			case docker.ActionDie, docker.ActionDestroy, docker.ActionOOM:
				d.enqueue(ev.Labels[afev1.LabelNamespace], ev.Labels[afev1.LabelSandbox])
			}
		case err := <-errs:
			return err
		}
	}
}

func (d *DockerEventSource) enqueue(namespace, name string) {
	if namespace == "" || name == "" {
		return
	}
	sbx := &afev1.Sandbox{}
	sbx.Namespace, sbx.Name = namespace, name
	d.Out <- event.TypedGenericEvent[*afev1.Sandbox]{Object: sbx}
}

func (d *DockerEventSource) resyncAll(ctx context.Context) {
	list := &afev1.SandboxList{}
	if err := d.Client.List(ctx, list); err != nil {
		logf.FromContext(ctx).Error(err, "List sandboxes for a resync")
		return
	}
	for i := range list.Items {
		d.enqueue(list.Items[i].Namespace, list.Items[i].Name)
	}
}
