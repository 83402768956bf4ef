package docker

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"
)

// Events streams the events of containers carrying all the labels.
func (c *Client) Events(ctx context.Context, labels map[string]string, since time.Time) (<-chan Event, <-chan error) {
	f := labelFilter(labels)
	f.Add("type", string(events.ContainerEventType))
	for _, a := range []EventAction{ActionCreate, ActionStart, ActionDie, ActionDestroy, ActionOOM, ActionExecStart, ActionExecDie} {
		f.Add("event", string(a))
	}
	opts := events.ListOptions{Filters: f}
	if !since.IsZero() {
		opts.Since = fmt.Sprintf("%d.%09d", since.Unix(), since.Nanosecond())
	}
	return c.events(ctx, opts)
}

// NetworkEvents streams the creation and removal of every network, whoever
// made it, until ctx ends or the connection breaks (an error on the second
// channel).
func (c *Client) NetworkEvents(ctx context.Context) (<-chan Event, <-chan error) {
	return c.networkEvents(ctx, time.Time{})
}

// networkEvents is NetworkEvents from since (the zero time: from when the
// stream opens).
func (c *Client) networkEvents(ctx context.Context, since time.Time) (<-chan Event, <-chan error) {
	f := filters.NewArgs(filters.Arg("type", string(events.NetworkEventType)))
	for _, a := range []EventAction{ActionCreate, ActionDestroy} {
		f.Add("event", string(a))
	}
	opts := events.ListOptions{Filters: f}
	if !since.IsZero() {
		opts.Since = fmt.Sprintf("%d.%09d", since.Unix(), since.Nanosecond())
	}
	return c.events(ctx, opts)
}

func (c *Client) events(ctx context.Context, opts events.ListOptions) (<-chan Event, <-chan error) {
	c.count("events")
	msgs, errs := c.api.Events(ctx, opts)
	out := make(chan Event, 64)
	outErr := make(chan error, 1)
	go func() {
		defer close(out)
		for {
			select {
			case <-ctx.Done():
				outErr <- ctx.Err()
				return
			case err := <-errs:
				outErr <- wrap(err, "events")
				return
			case m := <-msgs:
				// An exec's actions carry its command line after the
				// verb ("exec_start: sh -c true").
				verb, detail, _ := strings.Cut(string(m.Action), ":")
				ev := Event{
					Action: EventAction(verb),
					Detail: strings.TrimSpace(detail),
					ID:     m.Actor.ID,
					Name:   m.Actor.Attributes["name"],
					Labels: m.Actor.Attributes,
					Time:   time.Unix(0, m.TimeNano),
				}
				select {
				case out <- ev:
				case <-ctx.Done():
					outErr <- ctx.Err()
					return
				}
			}
		}
	}()
	return out, outErr
}
