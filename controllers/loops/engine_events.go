package loops

import (
	"context"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/activity"
	"afe.dev/sandbox/internal/telemetry"
)

// DockerEventSource turns the engine's container events into reconcile
// requests for the Sandbox the container belongs to. It reconnects when the
// stream breaks (an engine restart, say) and then asks every Sandbox to be
// looked at again, since events may have been missed meanwhile.
type DockerEventSource struct {
	Engine   EventEngine
	Client   client.Reader
	Instance string
	// Activity records the commands seen in sandbox containers.
	Activity *activity.Log
	// execs records in the telemetry the commands others executed in
	// sandbox containers (nil: none are).
	execs *engineExecs
	// members finds the Sandbox a claimed pool member serves.
	members *claimedMembers
	// Out receives one event per affected Sandbox.
	Out chan event.TypedGenericEvent[*afev1.Sandbox]
	// Pools receives one event per SandboxPool whose member died or went.
	Pools chan event.TypedGenericEvent[*afev1.SandboxPool]
}

// NewDockerEventSource returns a source with its output channel, which
// records in store (nil: none) the commands others execute in sandbox
// containers.
func NewDockerEventSource(engine EventEngine, c client.Reader, instance string, store *telemetry.Store) *DockerEventSource {
	d := &DockerEventSource{Engine: engine, Client: c, Instance: instance, Activity: &activity.Log{},
		Out: make(chan event.TypedGenericEvent[*afev1.Sandbox], 1024), Pools: make(chan event.TypedGenericEvent[*afev1.SandboxPool], 256)}
	d.members = newClaimedMembers(engine, c, instance)
	d.execs = newEngineExecs(engine, store, instance, d.sandboxOf)
	return d
}

// NeedLeaderElection is true: only the leader acts on events.
func (d *DockerEventSource) NeedLeaderElection() bool { return true }

// Start streams events until ctx ends.
func (d *DockerEventSource) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("docker-events")
	if d.execs != nil {
		go d.execs.Start(ctx)
	}
	backoff := time.Second
	connected := false
	// The time of the last event seen: a new stream starts there, so that
	// the engine replays what it still holds of the gap (the execs the
	// telemetry records among them).
	var last time.Time
	for ctx.Err() == nil {
		events, errs := d.Engine.Events(ctx, map[string]string{afev1.LabelController: d.Instance}, last)
		if connected {
			// Reconnected: whatever happened while disconnected is unknown.
			d.resyncAll(ctx)
		}
		connected = true
		err := d.pump(events, errs, &backoff, &last)
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

func (d *DockerEventSource) pump(events <-chan docker.Event, errs <-chan error, backoff *time.Duration, last *time.Time) error {
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return <-errs
			}
			*backoff = time.Second
			if ev.Time.After(*last) {
				*last = ev.Time
			}
			switch ev.Action {
			case docker.ActionDie, docker.ActionDestroy, docker.ActionOOM:
				d.Enqueue(ev.Labels[afev1.LabelNamespace], ev.Labels[afev1.LabelSandbox])
				d.enqueuePool(ev)
			case docker.ActionStart:
				d.sawStart(ev)
			case docker.ActionExecStart, docker.ActionExecDie:
				d.sawExec(ev)
			}
		case err := <-errs:
			return err
		}
	}
}

// Enqueue asks for a reconcile of the Sandbox namespace/name.
func (d *DockerEventSource) Enqueue(namespace, name string) {
	if namespace == "" || name == "" {
		return
	}
	sbx := &afev1.Sandbox{}
	sbx.Namespace, sbx.Name = namespace, name
	d.Out <- event.TypedGenericEvent[*afev1.Sandbox]{Object: sbx}
}

// enqueuePool asks for a reconcile of the SandboxPool of the event of a
// member's container or proxy (a claimed member's too: its pool refills).
// A claimed member names no Sandbox: the Sandbox whose name it bears is
// looked at too (which member is its, its claim record says).
func (d *DockerEventSource) enqueuePool(ev docker.Event) {
	role, own := memberRole(ev.Labels)
	if role == "" {
		return
	}
	namespace := ev.Labels[afev1.LabelNamespace]
	d.EnqueuePool(namespace, ev.Labels[afev1.LabelPool])
	if d.Client == nil || ev.Name == "" || ev.Name == own {
		return
	}
	if sbx := d.members.named(namespace, ev.Name, role); sbx != nil {
		d.Enqueue(namespace, sbx.Name)
	}
}

// EnqueuePool asks for a reconcile of the SandboxPool namespace/name.
func (d *DockerEventSource) EnqueuePool(namespace, name string) {
	if namespace == "" || name == "" {
		return
	}
	p := &afev1.SandboxPool{}
	p.Namespace, p.Name = namespace, name
	select {
	case d.Pools <- event.TypedGenericEvent[*afev1.SandboxPool]{Object: p}:
	default: // the pool's resync is the fallback
	}
}

func (d *DockerEventSource) resyncAll(ctx context.Context) {
	list := &afev1.SandboxList{}
	if err := d.Client.List(ctx, list); err != nil {
		logf.FromContext(ctx).Error(err, "List sandboxes for a resync")
		return
	}
	for i := range list.Items {
		d.Enqueue(list.Items[i].Namespace, list.Items[i].Name)
	}
}

// sawExec records a command starting or ending in a sandbox container as
// the activity of the Sandbox whose UID the container's labels carry (a
// proxy's commands are not the sandbox's), and has the end looked at by the
// Sandbox's idle timer when it has one.
func (d *DockerEventSource) sawExec(ev docker.Event) {
	if d.execs != nil {
		d.execs.saw(ev) // every role's: the controller's own execs are forgotten at their end
	}
	if !isSandboxExec(ev) {
		return
	}
	uid := ev.Labels[afev1.LabelSandboxUID]
	var sbx *afev1.Sandbox
	if ev.Labels[afev1.LabelRole] == afev1.RoleMember {
		if sbx = d.members.sandboxOf(ev); sbx == nil {
			return // an unclaimed member serves no sandbox
		}
		uid = string(sbx.UID)
	}
	d.Activity.Saw(uid, ev.Time)
	if ev.Action != docker.ActionExecDie {
		return
	}
	if sbx == nil {
		sbx = d.sandboxOf(ev)
	}
	if sbx != nil && sbx.Spec.Lifecycle.IdleTimeout() > 0 {
		d.Enqueue(sbx.Namespace, sbx.Name)
	}
}

// sawStart has a suspended Sandbox looked at when its container was started
// behind the controller's back: it is stopped again.
func (d *DockerEventSource) sawStart(ev docker.Event) {
	if role := ev.Labels[afev1.LabelRole]; role != afev1.RoleSandbox && role != afev1.RoleProxy && role != afev1.RoleMember {
		return
	}
	if sbx := d.sandboxOf(ev); sbx != nil && sbx.Status.Phase == afev1.SandboxSuspended {
		d.Enqueue(sbx.Namespace, sbx.Name)
	}
}

// sandboxOf is the Sandbox, from the cache, whose UID the event's labels
// carry, or which the claimed pool member of the event serves; nil when
// there is none.
func (d *DockerEventSource) sandboxOf(ev docker.Event) *afev1.Sandbox {
	if d.Client == nil {
		return nil
	}
	if role, _ := memberRole(ev.Labels); role != "" {
		return d.members.sandboxOf(ev)
	}
	sbx := &afev1.Sandbox{}
	key := client.ObjectKey{Namespace: ev.Labels[afev1.LabelNamespace], Name: ev.Labels[afev1.LabelSandbox]}
	if key.Namespace == "" || key.Name == "" || d.Client.Get(context.Background(), key, sbx) != nil ||
		string(sbx.UID) != ev.Labels[afev1.LabelSandboxUID] {
		return nil
	}
	return sbx
}

// isSandboxExec is true for an exec event of a sandbox container or of a
// pool member, which serves a sandbox once claimed (not a proxy's): the
// labels are the container's, as the engine reports them.
func isSandboxExec(ev docker.Event) bool {
	role := ev.Labels[afev1.LabelRole]
	return (ev.Action == docker.ActionExecStart || ev.Action == docker.ActionExecDie) &&
		(role == afev1.RoleSandbox || role == afev1.RoleMember)
}
