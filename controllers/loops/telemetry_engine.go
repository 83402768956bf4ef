package loops

import (
	"context"
	"strconv"
	"sync"
	"time"

	logf "sigs.k8s.io/controller-runtime/pkg/log"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/metrics"
	"afe.dev/sandbox/internal/sandboxspec"
	"afe.dev/sandbox/internal/telemetry"
)

// engineExecs records the commands executed in sandbox containers by
// anyone with access to the engine (docker exec straight on it), as its
// event stream shows them: exec_start, then exec_die with the exit code.
// The controller's own execs are recorded where they are made (Runs, the
// API) and left out here.
type engineExecs struct {
	engine   execEngine
	store    *telemetry.Store
	instance string
	// sandboxOf finds the Sandbox an event's container labels name, nil
	// when its UID does not match.
	sandboxOf func(docker.Event) *afev1.Sandbox

	mu      sync.Mutex
	started map[string]execStart // by exec ID
	// ended holds the execs whose end was handled, the last maxEndedExecs
	// of them (oldest first in endedOrder): a stream started again since
	// its last event replays some, which are not recorded twice.
	ended      map[string]struct{}
	endedOrder []string
	jobs       chan docker.Event
}

// execStart is what an exec_start event said.
type execStart struct {
	time time.Time
	line string // the command line, as the engine words it
}

// maxEndedExecs bounds the execs remembered as ended: more than a replayed
// stream holds (the engine keeps 256 events).
const maxEndedExecs = 4096

// maxPendingExecs bounds the execs whose start was seen and whose end was
// not: an exec whose exec_die never comes (a stream that broke) is
// forgotten beyond it.
const maxPendingExecs = 4096

func newEngineExecs(engine execEngine, store *telemetry.Store, instance string, sandboxOf func(docker.Event) *afev1.Sandbox) *engineExecs {
	return &engineExecs{engine: engine, store: store, instance: instance, sandboxOf: sandboxOf,
		started: map[string]execStart{}, ended: map[string]struct{}{}, jobs: make(chan docker.Event, 1024)}
}

// saw takes an exec event from the event pump; it never blocks it. The
// controller's own execs, in containers of every role, are forgotten at
// their end; only those of sandbox containers are recorded.
func (e *engineExecs) saw(ev docker.Event) {
	id := ev.Labels["execID"]
	if id == "" || e.handled(id, ev.Action == docker.ActionExecDie) {
		return
	}
	if ev.Action == docker.ActionExecDie && e.engine.OwnExec(id) {
		e.engine.ForgetExec(id)
		e.mu.Lock()
		delete(e.started, id)
		e.mu.Unlock()
		return
	}
	if !isSandboxExec(ev) {
		return
	}
	if ev.Action == docker.ActionExecStart {
		e.mu.Lock()
		if len(e.started) < maxPendingExecs {
			e.started[id] = execStart{time: ev.Time, line: ev.Detail}
		}
		e.mu.Unlock()
		return
	}
	select {
	case e.jobs <- ev:
	default:
		metrics.TelemetryDropped.Inc()
	}
}

// handled is true for an exec whose end was handled already; with end, the
// exec's end is handled from now on.
func (e *engineExecs) handled(id string, end bool) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.ended[id]; ok {
		return true
	}
	if end {
		if len(e.endedOrder) == maxEndedExecs {
			delete(e.ended, e.endedOrder[0])
			e.endedOrder = e.endedOrder[1:]
		}
		e.ended[id] = struct{}{}
		e.endedOrder = append(e.endedOrder, id)
	}
	return false
}

// recorders is how many ends are recorded at once: each asks the engine
// about its exec, which a busy engine answers in a fraction of a second,
// and a burst of execs on the engine (80 at once in the tests) would
// otherwise wait in line for each other's answers.
const recorders = 4

// Start records the ends it is handed, recorders at a time, until ctx
// ends.
func (e *engineExecs) Start(ctx context.Context) {
	for range recorders - 1 {
		go e.recordEnds(ctx)
	}
	e.recordEnds(ctx)
}

// recordEnds records the ends it takes off the queue until ctx ends.
func (e *engineExecs) recordEnds(ctx context.Context) {
	log := logf.FromContext(ctx).WithName("telemetry")
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-e.jobs:
			if err := e.record(ctx, ev); err != nil {
				log.V(1).Info("An exec on the engine could not be recorded", "exec", ev.Labels["execID"], "error", err.Error())
			}
		}
	}
}

// record puts one exec that ended into the telemetry, with the identity of
// the Sandbox whose UID the container's labels carry, verified against the
// Sandbox itself: an exec in a container whose labels do not match is not
// a sandbox's command and is left out.
func (e *engineExecs) record(ctx context.Context, ev docker.Event) error {
	id := ev.Labels["execID"]
	e.mu.Lock()
	start, ok := e.started[id]
	delete(e.started, id)
	e.mu.Unlock()
	if !ok {
		start = execStart{time: ev.Time, line: ev.Detail}
	}
	sbx := e.sandboxOf(ev)
	if sbx == nil {
		return nil
	}
	// A claimed member's binding was verified by sandboxOf (its claim
	// record); a sandbox container's labels are its identity.
	ident := sandboxspec.IdentityOf(sbx, e.instance)
	if ev.Labels[afev1.LabelRole] != afev1.RoleMember && !ident.OwnsAs(ev.Labels, afev1.RoleSandbox) {
		return nil
	}
	rec := telemetry.Record{
		Namespace: sbx.Namespace, Sandbox: sbx.Name, SandboxUID: string(sbx.UID), Ticket: ident.Ticket,
		Started: start.time, Ended: ev.Time, ExitCode: exitOf(ev),
		Source: telemetry.SourceEngine, StartedBy: "the engine (an exec not made by the controller)",
	}
	if e.store != nil {
		// The exec's own words and user; once the engine forgot the exec,
		// the command line its start event stated (its user unknown).
		if info, err := e.engine.InspectExec(ctx, id); err == nil {
			rec.Command, rec.User = info.Cmd, info.User
		} else if start.line != "" {
			rec.Command = []string{start.line}
		} else {
			return err
		}
	}
	telemetry.RecordCommand(e.store, rec, sbx.Status.Phase)
	return nil
}

// exitOf is the exit code an exec_die event states (-1 when none).
func exitOf(ev docker.Event) int {
	code, err := strconv.Atoi(ev.Labels["exitCode"])
	if err != nil {
		return -1
	}
	return code
}
