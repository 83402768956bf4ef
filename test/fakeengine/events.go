package fakeengine

import (
	"context"
	"errors"
	"strconv"
	"time"

	"afe.dev/sandbox/docker"
)

// subscriber is one Events stream.
type subscriber struct {
	labels map[string]string
	// in is never closed: emit may send to it after the stream ended.
	in     chan docker.Event
	broken chan error
}

// breakWith ends the stream with err. The caller holds e.mu and removes s.
func (s *subscriber) breakWith(err error) {
	select {
	case s.broken <- err:
	default:
	}
}

// Events streams the container events create, start, die, destroy and oom
// of containers carrying all the labels until ctx ends (ctx.Err() on the
// second channel) or the engine goes away (docker.ErrUnavailable). The
// first channel is closed after the error is sent, as docker.Client does.
func (e *Engine) Events(ctx context.Context, labels map[string]string, since time.Time) (<-chan docker.Event, <-chan error) {
	out := make(chan docker.Event, 64)
	outErr := make(chan error, 1)
	e.mu.Lock()
	if err := e.check(OpEvents); err != nil {
		e.mu.Unlock()
		outErr <- err
		close(out)
		return out, outErr
	}
	s := &subscriber{labels: copyLabels(labels), in: make(chan docker.Event, 4096), broken: make(chan error, 1)}
	if !since.IsZero() {
		for _, ev := range e.history {
			if !ev.Time.Before(since) && labelsMatch(ev.Labels, s.labels) {
				s.in <- copyEvent(ev)
			}
		}
	}
	e.subs[s] = struct{}{}
	e.mu.Unlock()
	go func() {
		defer close(out)
		end := func(err error) {
			e.mu.Lock()
			delete(e.subs, s)
			e.mu.Unlock()
			outErr <- err
		}
		for {
			select {
			case <-ctx.Done():
				end(ctx.Err())
				return
			case err := <-s.broken:
				end(err)
				return
			case ev := <-s.in:
				select {
				case out <- ev:
				case <-ctx.Done():
					end(ctx.Err())
					return
				}
			}
		}
	}()
	return out, outErr
}

// emit sends an event of c to every stream whose labels it carries. The
// event's labels are the container's labels with the engine's attributes
// name and image (and exitCode for die), as the engine reports them. The
// caller holds e.mu.
func (e *Engine) emit(action docker.EventAction, c *container) {
	attrs := copyLabels(c.spec.Labels)
	attrs["name"], attrs["image"] = c.spec.Name, c.spec.Image
	if action == docker.ActionDie {
		attrs["exitCode"] = strconv.Itoa(c.exitCode)
	}
	ev := docker.Event{Action: action, ID: c.id, Name: c.spec.Name, Labels: attrs, Time: now()}
	// The engine keeps its last 256 events for a stream that asks since.
	if len(e.history) == maxHistory {
		e.history = append(e.history[:0], e.history[1:]...)
	}
	e.history = append(e.history, copyEvent(ev))
	for s := range e.subs {
		if !labelsMatch(c.spec.Labels, s.labels) {
			continue
		}
		select {
		case s.in <- copyEvent(ev):
		default:
			// A consumer this far behind has lost the stream, as with
			// the engine: it learns so and resyncs.
			s.breakWith(errSlowConsumer)
			delete(e.subs, s)
		}
	}
}

// maxHistory is how many events the engine keeps for a stream that asks
// since (Docker keeps 256).
const maxHistory = 256

var errSlowConsumer = errors.New("events: the consumer fell behind and the stream was cut")

func copyEvent(ev docker.Event) docker.Event {
	ev.Labels = copyLabels(ev.Labels)
	return ev
}
