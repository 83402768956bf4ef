package loops

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	accessv1 "afe.dev/sandbox/api/access/v1alpha1"
	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/controllers/identity"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/egresslog"
	"afe.dev/sandbox/internal/metrics"
	"afe.dev/sandbox/internal/sandboxspec"
	"afe.dev/sandbox/internal/telemetry"
)

// EgressEngine lists the proxies and follows their logs.
type EgressEngine interface {
	ListContainers(ctx context.Context, labels map[string]string) ([]docker.Container, error)
	FollowLogs(ctx context.Context, id string, since time.Time, line func(docker.LogLine) error) error
}

// EgressFollower records every decision of this instance's verified egress
// proxies in the telemetry store: it follows each running proxy's log
// through the engine (one goroutine per proxy, at most Max of them), from
// the last record written from that container on, so that nothing is lost
// or written twice across a restart of the manager; a proxy recreated is a
// new container and a new follow. The identity of the records is the
// container's, as egressOwner decides it, never the log's.
type EgressFollower struct {
	Engine   EgressEngine
	Store    *telemetry.Store
	Instance string
	// Owner decides whose egress a proxy container logs (egressOwner with
	// the manager's view of the Sandboxes).
	Owner func(docker.Container) (sandboxspec.Identity, bool)
	// Born is when the Sandbox of the identity was created (nil, or zero:
	// unknown): a line of an earlier time is no request of it (a pool
	// member's proxy, before its claim).
	Born func(sandboxspec.Identity) time.Time
	// Period is how often the proxies are listed (default 2 s).
	Period time.Duration
	// Max bounds the proxies followed at once (default 1024).
	Max int
	// Executions name the commands running in the sandbox at each request
	// (nil: none are named).
	Executions *telemetry.Executions
	// Recorder, when set, puts an Event on the Sandbox the first time its
	// proxy denies a host (EgressDeniedEvent).
	Recorder events.EventRecorder

	mu        sync.Mutex
	following map[string]context.CancelFunc // by container ID
	wg        sync.WaitGroup
}

// NeedLeaderElection is true: one manager writes the records.
func (f *EgressFollower) NeedLeaderElection() bool { return true }

// Start follows the proxies until ctx ends, then waits for every follow to
// stop.
func (f *EgressFollower) Start(ctx context.Context) error {
	if f.Period <= 0 {
		f.Period = 2 * time.Second
	}
	if f.Max <= 0 {
		f.Max = 1024
	}
	f.mu.Lock()
	f.following = map[string]context.CancelFunc{}
	f.mu.Unlock()
	log := logf.FromContext(ctx).WithName("egress")
	tick := time.NewTicker(f.Period)
	defer tick.Stop()
	for {
		if err := f.scan(ctx); err != nil && ctx.Err() == nil {
			log.V(1).Info("The proxies could not be listed", "error", err.Error())
		}
		select {
		case <-ctx.Done():
			f.wg.Wait()
			return nil
		case <-tick.C:
		}
	}
}

// scan starts a follow for each running verified proxy not followed yet
// and stops those of proxies no longer listed.
func (f *EgressFollower) scan(ctx context.Context) error {
	list, err := f.Engine.ListContainers(ctx, map[string]string{afev1.LabelController: f.Instance, afev1.LabelRole: afev1.RoleProxy})
	if err != nil {
		return err
	}
	listed := map[string]bool{}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range list {
		listed[c.ID] = true
		if _, ok := f.following[c.ID]; ok || !c.Running || len(f.following) >= f.Max {
			continue
		}
		id, ok := f.Owner(c)
		if !ok {
			continue
		}
		fctx, cancel := context.WithCancel(ctx)
		f.following[c.ID] = cancel
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			f.follow(fctx, c.ID, id)
			f.mu.Lock()
			delete(f.following, c.ID)
			f.mu.Unlock()
			cancel()
		}()
	}
	for cid, cancel := range f.following {
		if !listed[cid] {
			cancel()
		}
	}
	return nil
}

// Following is how many proxies are followed now.
func (f *EgressFollower) Following() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.following)
}

// follow records one proxy's decisions until its log ends or ctx does.
func (f *EgressFollower) follow(ctx context.Context, proxy string, id sandboxspec.Identity) {
	log := logf.FromContext(ctx).WithName("egress").WithValues("proxy", proxy)
	cursor, resumed, err := f.Store.EgressCursor(ctx, proxy)
	if err != nil {
		log.Info("The proxy's last record could not be read; not followed", "error", err.Error())
		return
	}
	add := func(e telemetry.Egress) error { return f.Store.AddEgress(ctx, e) }
	p := &proxyLog{proxy: proxy, id: id, cursor: cursor, resumed: resumed, add: add, running: f.Executions.During,
		denied: f.firstDenials(id)}
	if f.Born != nil {
		p.born = f.Born(id)
	}
	tctx, stop := context.WithCancel(ctx)
	defer stop()
	go p.flushEvery(tctx, emptyWindow)
	err = f.Engine.FollowLogs(ctx, proxy, cursor.At, p.line)
	if err != nil && !errors.Is(err, context.Canceled) {
		log.V(1).Info("The proxy's log broke off", "error", err.Error())
	}
	// The log ended, or the proxy went: what was aggregated is recorded
	// now, on a context of its own (bounded), the follow's being done. A
	// manager stopping may fail to: a follow started again reads it again.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	p.finish(func(e telemetry.Egress) error { return f.Store.AddEgress(fctx, e) })
}

// proxyLog turns the lines of one proxy's log into egress records.
type proxyLog struct {
	proxy   string
	id      sandboxspec.Identity
	cursor  telemetry.Cursor
	resumed bool
	// add queues a record, waiting for room (an error: ctx ended).
	add func(telemetry.Egress) error
	// running names what ran in the sandbox (by UID) during a request.
	running func(uid string, from, to time.Time) []string
	// denied is told of each denied request's record (nil: of none).
	denied func(telemetry.EgressRecord)
	// born is when the Sandbox was created: earlier lines are not its.
	born time.Time
	// at and n are the engine's timestamp of the last line and its rank
	// among the lines of that timestamp.
	at time.Time
	n  int
	// mu orders the lines and the flushes of empty.
	mu sync.Mutex
	// empty aggregates the connections that carried no request since the
	// last record (none while its Connections is 0).
	empty telemetry.Egress
}

// line takes one line of the log, in order; it fails only when its record
// could not be queued (the follow ends: it starts again from the cursor).
func (p *proxyLog) line(l docker.LogLine) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if l.Time.Equal(p.at) {
		p.n++
	} else {
		p.at, p.n = l.Time, 0
	}
	if p.resumed && !p.cursor.After(p.at, p.n) {
		return nil // recorded before
	}
	if !strings.HasPrefix(l.Text, "afe-egress ") {
		return nil // squid's other output
	}
	d, err := egresslog.Parse(l.Text)
	if err != nil {
		metrics.EgressLinesRefused.Inc()
		return nil
	}
	// The proxy's own readiness probe, from inside its container; or a
	// request before the Sandbox existed (to a pool member's proxy, before
	// its claim: the Sandbox's creation time is kept to the second).
	if ip := net.ParseIP(d.Client); ip != nil && ip.IsLoopback() || d.Time.Before(p.born) {
		return nil
	}
	if d.Reason == egresslog.ReasonEmpty {
		return p.aggregate(d)
	}
	// The connections without a request before it are recorded first.
	if err := p.flushLocked(time.Time{}); err != nil {
		return err
	}
	rec := egressRecord(p.id, p.proxy, d)
	if p.running != nil {
		rec.Running = p.running(p.id.UID, d.Time.Add(-d.Duration), d.Time)
	}
	if err := p.add(telemetry.Egress{Record: rec, Cursor: telemetry.Cursor{At: p.at, N: p.n}}); err != nil {
		return err
	}
	metrics.EgressRequests.WithLabelValues(d.Decision).Inc()
	if p.denied != nil && rec.Decision == accessv1.EgressDenied {
		p.denied(rec)
	}
	return nil
}

// egressRecord is the record of a decision of the proxy of id.
func egressRecord(id sandboxspec.Identity, proxy string, d egresslog.Decision) telemetry.EgressRecord {
	decision := accessv1.EgressAllowed
	if d.Decision == egresslog.Denied {
		decision = accessv1.EgressDenied
	}
	return telemetry.EgressRecord{
		Namespace: id.Namespace, Sandbox: id.Name, SandboxUID: id.UID, Ticket: id.Ticket,
		Time: d.Time, Duration: metav1.Duration{Duration: d.Duration},
		Method: d.Method, Host: d.Host, Port: d.Port, Decision: decision, Reason: d.Reason, Status: d.Status,
		BytesUp: d.BytesUp, BytesDown: d.BytesDown, Proxy: proxy,
	}
}

// NewEgressFollower is the follower of this instance's proxies that
// records into store, the Sandboxes read from c (the manager's cache), a
// claimed pool member's proxy verified on its Sandbox's claim record, read
// from records.
func NewEgressFollower(engine EgressEngine, records identity.VolumeInspector, c client.Reader, instance string, store *telemetry.Store,
	executions *telemetry.Executions, recorder events.EventRecorder) *EgressFollower {
	get := func(namespace, name string) *afev1.Sandbox {
		sbx := &afev1.Sandbox{}
		if namespace == "" || name == "" || c.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, sbx) != nil {
			return nil
		}
		return sbx
	}
	f := &EgressFollower{Engine: engine, Store: store, Instance: instance, Executions: executions, Recorder: recorder}
	// A claimed pool member's proxy is the Sandbox's whose proxy name it
	// bears when that Sandbox's claim record binds it (pool.BindsProxy).
	members := newClaimedMembers(records, c, instance)
	member := func(ct docker.Container) *afev1.Sandbox {
		return members.sandboxOf(docker.Event{ID: ct.ID, Name: ct.Name, Labels: ct.Labels})
	}
	f.Owner = func(ct docker.Container) (sandboxspec.Identity, bool) { return egressOwner(ct, instance, get, member) }
	f.Born = func(id sandboxspec.Identity) time.Time {
		if sbx := get(id.Namespace, id.Name); sbx != nil && string(sbx.UID) == id.UID {
			return sbx.CreationTimestamp.Time
		}
		return time.Time{}
	}
	return f
}

// EgressDeniedEvent is the reason of the Event put on a Sandbox the first
// time its proxy denies a host.
const EgressDeniedEvent = "EgressDenied"

// maxDeniedHosts bounds the hosts remembered as denied per follow of a
// proxy: past it, no Event is put for a new one (the records still say).
const maxDeniedHosts = 256

// firstDenials is told of a proxy's denied requests and puts one Event on
// the Sandbox per host the first time it is denied during this follow
// (a manager started again puts it again at the next denial); nil without
// a Recorder.
func (f *EgressFollower) firstDenials(id sandboxspec.Identity) func(telemetry.EgressRecord) {
	if f.Recorder == nil {
		return nil
	}
	sbx := &afev1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: id.Namespace, Name: id.Name, UID: types.UID(id.UID)}}
	sbx.SetGroupVersionKind(afev1.GroupVersion.WithKind("Sandbox"))
	seen := map[string]struct{}{}
	return func(r telemetry.EgressRecord) {
		if _, ok := seen[r.Host]; ok || len(seen) >= maxDeniedHosts {
			return
		}
		seen[r.Host] = struct{}{}
		// The host is escaped and bounded (egresslog): data, not words.
		f.Recorder.Eventf(sbx, nil, corev1.EventTypeWarning, EgressDeniedEvent, "Egress",
			"The egress proxy denied %s port %d (%s); further denials of it are in the egress telemetry", r.Host, r.Port, r.Reason)
	}
}
