package main

import (
	"context"
	"fmt"
	"time"

	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"
)

// goneWatch tells when every object listed at its start was destroyed, from
// the engine's event stream: waiting for the cleanup costs the engine no
// request while it works, as the CLI baseline's own wait costs none.
type goneWatch struct {
	left   map[string]bool
	msgs   <-chan events.Message
	errs   <-chan error
	cancel func()
}

// watchGone lists the objects carrying the labels (containers and networks
// by ID, volumes by name) and follows their destroy events.
func (b *bench) watchGone(ctx context.Context, labels map[string]string) (*goneWatch, error) {
	api, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	f := filters.NewArgs(filters.Arg("event", "destroy"))
	for _, t := range []events.Type{events.ContainerEventType, events.NetworkEventType, events.VolumeEventType} {
		f.Add("type", string(t))
	}
	msgs, errs := api.Events(ctx, events.ListOptions{Filters: f})
	w := &goneWatch{left: map[string]bool{}, msgs: msgs, errs: errs, cancel: func() { cancel(); _ = api.Close() }}
	cs, err := b.engine.ListContainers(ctx, labels)
	if err != nil {
		w.cancel()
		return nil, err
	}
	for _, c := range cs {
		w.left[c.ID] = true
	}
	ns, err := b.engine.ListNetworks(ctx, labels)
	if err != nil {
		w.cancel()
		return nil, err
	}
	for _, n := range ns {
		w.left[n.ID] = true
	}
	vs, err := b.engine.ListVolumes(ctx, labels)
	if err != nil {
		w.cancel()
		return nil, err
	}
	for _, v := range vs {
		w.left[v.Name] = true
	}
	return w, nil
}

// wait returns when the last of the objects was destroyed, as the engine
// timed it.
func (w *goneWatch) wait(timeout time.Duration) (time.Time, error) {
	defer w.cancel()
	last := time.Now()
	deadline := time.After(timeout)
	for len(w.left) > 0 {
		select {
		case m := <-w.msgs:
			if w.left[m.Actor.ID] {
				delete(w.left, m.Actor.ID)
				last = time.Unix(0, m.TimeNano)
			}
		case err := <-w.errs:
			return last, fmt.Errorf("engine events: %w", err)
		case <-deadline:
			return last, fmt.Errorf("%d labelled objects left after %s", len(w.left), timeout)
		}
	}
	return last, nil
}
