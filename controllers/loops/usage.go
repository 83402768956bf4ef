package loops

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	accessv1 "afe.dev/sandbox/api/access/v1alpha1"
	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/controllers/disklimit"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/metrics"
	"afe.dev/sandbox/internal/pool"
	"afe.dev/sandbox/internal/sandboxspec"
	"afe.dev/sandbox/internal/telemetry"
	"afe.dev/sandbox/internal/usage"
)

// usageConcurrency bounds the stats requests in flight at once.
const usageConcurrency = 4

// UsageCollector measures what every sandbox of this instance uses, every
// Period, and keeps it in Store, which the access API serves
// (sandboxusages), as metrics-server keeps what Pods use: in memory,
// never in an object's status. The leader also reports it as Prometheus
// series. It measures on every replica, so that each one's access API
// answers; the series and the disk limits are the leader's alone. One
// measurement is one list of the running sandbox containers, one disk
// usage request for all writable layers and volumes, and the usage of each
// running sandbox container: read from the host's cgroup files for a local
// engine, else one one-shot stats request each, since the engine has no
// batched call for CPU, memory and network (docs/telemetry.md, Usage, has
// the cost). Nothing is asked of the engine when no sandbox runs.
type UsageCollector struct {
	Client   client.Client
	Cache    cache.Cache
	Engine   UsageEngine
	Instance string
	Period   time.Duration
	// Disk receives every workspace size measured; DiskPeriod is how often
	// the workspaces are measured (one disk usage request) between two
	// full measurements while a sandbox with resources.disk exists.
	Disk       *disklimit.Meter
	DiskPeriod time.Duration
	// Enqueue asks for a reconcile of the Sandbox namespace/name: one whose
	// workspace went over its resources.disk or its inode bound, or came
	// back under them (the files of a stopped container's writable layer
	// went with it).
	Enqueue func(namespace, name string)
	// Telemetry, when set, gives the egress bytes and denials its records
	// add up to.
	Telemetry *telemetry.Store
	// Store keeps the latest measurement, for the access API.
	Store *usage.Store
	// Elected is closed once this replica leads (the manager's Elected);
	// nil leads from the start.
	Elected <-chan struct{}

	// over holds the UIDs last measured over their disk limit, with their
	// Sandbox's namespace and name.
	over map[string]types.NamespacedName
}

// NeedLeaderElection is false: every replica serves the access API, from
// its own measurement.
func (u *UsageCollector) NeedLeaderElection() bool { return false }

// leading tells whether this replica leads.
func (u *UsageCollector) leading() bool {
	if u.Elected == nil {
		return true
	}
	select {
	case <-u.Elected:
		return true
	default:
		return false
	}
}

// Start measures at once, then every Period, until ctx ends.
func (u *UsageCollector) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("usage")
	if !u.Cache.WaitForCacheSync(ctx) {
		return nil
	}
	tick := u.Period
	if u.DiskPeriod > 0 && (tick <= 0 || u.DiskPeriod < tick) {
		tick = u.DiskPeriod
	}
	if tick <= 0 {
		return nil
	}
	var last time.Time
	for {
		var err error
		leading := u.leading()
		if u.Period > 0 && time.Since(last) >= u.Period-tick/2 {
			last = time.Now()
			err = u.collect(ctx, leading)
		} else if leading {
			err = u.checkDisk(ctx)
		}
		if err != nil && ctx.Err() == nil {
			log.Error(err, "Measure sandbox usage")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(tick):
		}
	}
}

// ownLabels select the objects of this instance.
func (u *UsageCollector) ownLabels() map[string]string {
	return map[string]string{afev1.LabelController: u.Instance}
}

// checkDisk measures the workspaces and writable layers alone, in one
// round, when a sandbox has a disk limit or an inode bound.
func (u *UsageCollector) checkDisk(ctx context.Context) error {
	list := &afev1.SandboxList{}
	if err := u.Client.List(ctx, list); err != nil {
		return err
	}
	if !slices.ContainsFunc(list.Items, func(sbx afev1.Sandbox) bool { return u.Disk.Bounds(&sbx) }) {
		return nil
	}
	disk, err := u.Engine.DiskUsage(ctx, u.ownLabels())
	if err != nil {
		return err
	}
	u.recordDisk(list.Items, disk)
	return nil
}

// recordDisk passes the workspace sizes to the meter and queues the
// sandboxes that just went over their disk limit, or back under it.
func (u *UsageCollector) recordDisk(sandboxes []afev1.Sandbox, disk *docker.DiskUsage) {
	if u.Disk == nil {
		return
	}
	u.Disk.Set(disklimit.Uses(disk, u.Instance))
	u.Disk.SetInodesCounted(disk.InodesCounted)
	over := map[string]types.NamespacedName{}
	for i := range sandboxes {
		sbx := &sandboxes[i]
		if _, ok := u.Disk.OverDisk(sbx); !ok {
			continue
		}
		uid := string(sbx.UID)
		over[uid] = types.NamespacedName{Namespace: sbx.Namespace, Name: sbx.Name}
		if _, was := u.over[uid]; !was && u.Enqueue != nil {
			u.Enqueue(sbx.Namespace, sbx.Name)
		}
	}
	for uid, key := range u.over {
		if _, still := over[uid]; !still && u.Enqueue != nil {
			u.Enqueue(key.Namespace, key.Name)
		}
	}
	u.over = over
}

// measurement is what the engine reported in one round.
type measurement struct {
	// running are the running sandbox containers of this instance by the
	// afe.sandbox-uid label, with their usage.
	running map[string]runningContainer
	disk    *docker.DiskUsage
	time    time.Time
}

type runningContainer struct {
	container docker.Container
	usage     *docker.ContainerUsage
	// record is the claim record naming the container, a claimed member.
	record map[string]string
}

// collect measures every sandbox and keeps the figures in the Store; the
// leader also applies the disk limits and sets the series. Nothing is
// written to the API.
func (u *UsageCollector) collect(ctx context.Context, leading bool) error {
	m, err := u.measure(ctx)
	if err != nil {
		return err
	}
	list := &afev1.SandboxList{}
	if err := u.Client.List(ctx, list); err != nil {
		return err
	}
	if m.disk != nil && leading {
		u.recordDisk(list.Items, m.disk)
	}
	var errs []error
	var egress map[string]telemetry.EgressTotal
	if u.Telemetry != nil {
		if egress, err = u.Telemetry.EgressTotals(ctx); err != nil {
			errs = append(errs, fmt.Errorf("add up the egress records: %w", err))
		}
	}
	var samples []usage.Sample
	for i := range list.Items {
		sbx := &list.Items[i]
		figures, ok := m.usageOf(sbx, u.Instance)
		if !ok || !sbx.DeletionTimestamp.IsZero() {
			continue
		}
		t := egress[string(sbx.UID)]
		figures.EgressBytes, figures.EgressDenials = t.Bytes, t.Denials
		samples = append(samples, usage.Sample{Namespace: sbx.Namespace, Name: sbx.Name, UID: sbx.UID,
			Ticket: ticketOf(sbx), Labels: sbx.Labels, Usage: figures})
	}
	if u.Store != nil {
		u.Store.Set(m.time, u.Period, samples)
	}
	if leading {
		metrics.Usage.Set(samples)
	}
	return errors.Join(errs...)
}

// ticketOf is the Sandbox's spec.ticketRef, empty without one.
func ticketOf(sbx *afev1.Sandbox) string {
	if sbx.Spec.TicketRef == nil {
		return ""
	}
	return sbx.Spec.TicketRef.Name
}

// measure asks the engine, in one list, one disk usage request and the
// usage of each running sandbox container.
func (u *UsageCollector) measure(ctx context.Context) (*measurement, error) {
	containers, err := u.Engine.ListContainers(ctx, map[string]string{afev1.LabelController: u.Instance, afev1.LabelRole: afev1.RoleSandbox})
	if err != nil {
		return nil, err
	}
	m := &measurement{running: map[string]runningContainer{}, time: time.Now()}
	for _, ct := range containers {
		if ct.Running {
			m.running[ct.Labels[afev1.LabelSandboxUID]] = runningContainer{container: ct}
		}
	}
	if err := u.claimedMembers(ctx, m); err != nil {
		return nil, err
	}
	if len(m.running) == 0 {
		return m, nil
	}
	if m.disk, err = u.Engine.DiskUsage(ctx, u.ownLabels()); err != nil {
		return nil, err
	}
	uids := make([]string, 0, len(m.running))
	for uid := range m.running {
		uids = append(uids, uid)
	}
	usages := make([]*docker.ContainerUsage, len(uids))
	var wg sync.WaitGroup
	slots := make(chan struct{}, usageConcurrency)
	for i, uid := range uids {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			// A container that stopped meanwhile has no usage this round.
			usages[i], _ = u.Engine.ContainerUsage(ctx, m.running[uid].container.ID)
		})
	}
	wg.Wait()
	for i, uid := range uids {
		rc := m.running[uid]
		rc.usage = usages[i]
		m.running[uid] = rc
	}
	return m, nil
}

// claimedMembers adds to the running containers the claimed pool members,
// by the afe.sandbox-uid of the claim record that names each (checked
// again in usageOf, as internal/pool.Binds says).
func (u *UsageCollector) claimedMembers(ctx context.Context, m *measurement) error {
	members, err := u.Engine.ListContainers(ctx, map[string]string{afev1.LabelController: u.Instance, afev1.LabelRole: afev1.RoleMember})
	if err != nil || len(members) == 0 {
		return err
	}
	records, err := u.Engine.ListVolumes(ctx, map[string]string{afev1.LabelController: u.Instance, afev1.LabelRole: afev1.RoleClaim})
	if err != nil {
		return err
	}
	byMember := map[string]map[string]string{}
	for _, v := range records {
		byMember[v.Labels[afev1.LabelMember]] = v.Labels
	}
	for _, ct := range members {
		if rec := byMember[ct.ID]; ct.Running && rec != nil {
			m.running[rec[afev1.LabelSandboxUID]] = runningContainer{container: ct, record: rec}
		}
	}
	return nil
}

// usageOf is the usage of a sandbox whose container runs and was measured:
// the container and its workspace volume are found by the labels of the
// sandbox's identity, or of its claim record and the member it binds.
func (m *measurement) usageOf(sbx *afev1.Sandbox, instance string) (accessv1.Usage, bool) {
	id := sandboxspec.IdentityOf(sbx, instance)
	rc, ok := m.running[id.UID]
	if !ok || rc.usage == nil {
		return accessv1.Usage{}, false
	}
	claimed := rc.record != nil && pool.Binds(id, rc.record, &rc.container)
	if !claimed && !id.OwnsAs(rc.container.Labels, afev1.RoleSandbox) {
		return accessv1.Usage{}, false
	}
	figures := accessv1.Usage{
		CPUMilliseconds:      int64(rc.usage.CPUNanoseconds / 1_000_000),
		MemoryBytes:          int64(rc.usage.MemoryBytes),
		NetworkReceiveBytes:  int64(rc.usage.NetworkReceiveBytes),
		NetworkTransmitBytes: int64(rc.usage.NetworkTransmitBytes),
	}
	if m.disk != nil {
		figures.WritableLayerBytes = max(0, m.disk.Containers[rc.container.ID])
		for _, v := range m.disk.Volumes {
			ours := id.OwnsAs(v.Labels, afev1.RoleWorkspace) || claimed && pool.MemberVolumeOf(id, rc.record, v.Labels)
			if ours && v.Bytes > 0 {
				figures.WorkspaceBytes += v.Bytes
			}
		}
	}
	figures.DiskBytes = figures.WritableLayerBytes + figures.WorkspaceBytes
	return figures, true
}
