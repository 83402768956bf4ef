package run

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// executionEvents bounds the ends of attempts waiting to be queued.
const executionEvents = 1024

// executions are the attempts this process runs, by Run UID, in flight or
// ended and not yet forgotten, and the source that queues a Run when one of
// its attempts ends (in the spirit of Cluster API's task manager). An
// attempt runs under the context executions were made with, not under the
// reconcile that started it: it ends with the manager.
type executions struct {
	// base outlives single reconciles: attempts run under it.
	base context.Context
	// ends receives a Run when one of its attempts ended, or when it may
	// start now.
	ends chan event.TypedGenericEvent[*afev1.Run]

	mu       sync.Mutex
	attempts map[types.UID]*attempt
}

func newExecutions(base context.Context) *executions {
	return &executions{
		base:     base,
		ends:     make(chan event.TypedGenericEvent[*afev1.Run], executionEvents),
		attempts: map[types.UID]*attempt{},
	}
}

// start records a as the Run's attempt, replacing its reservation, and runs
// execute in its own goroutine, under a context that a.cancel ends.
func (e *executions) start(uid types.UID, a *attempt, execute func(context.Context)) {
	ctx, cancel := context.WithCancel(e.base)
	a.cancel = cancel
	e.mu.Lock()
	e.attempts[uid] = a
	e.mu.Unlock()
	go execute(ctx)
}

// get is the Run's attempt (or reservation), nil when there is none.
func (e *executions) get(uid types.UID) *attempt {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.attempts[uid]
}

// forget drops the Run's attempt: only once its outcome is written, or when
// it has none to write.
func (e *executions) forget(uid types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.attempts, uid)
}

// ended queues the Run one of whose attempts has just ended.
func (e *executions) ended(run *afev1.Run) {
	e.ends <- event.TypedGenericEvent[*afev1.Run]{Object: run}
}

// nudge queues the Run if there is room, and tells whether there was.
func (e *executions) nudge(run *afev1.Run) bool {
	select {
	case e.ends <- event.TypedGenericEvent[*afev1.Run]{Object: run}:
		return true
	default:
		return false
	}
}

// source is the event source of the ends of attempts, for the Run
// controller's watches.
func (e *executions) source() source.Source {
	return source.Channel(e.ends, &handler.TypedEnqueueRequestForObject[*afev1.Run]{})
}
