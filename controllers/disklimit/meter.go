// Package disklimit measures and enforces the disk a sandbox may use: the
// Meter holds the last measured bytes and inodes of each sandbox's volumes
// and writable layer (Uses reads them from the engine's disk usage, a pool
// member's counted for its claimant), which the usage collector fills and
// the Sandbox reconciler judges against resources.disk and the inode bound;
// the Probe decides once how the engine enforces resources.disk.
package disklimit

import (
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/resource"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/naming"
	"afe.dev/sandbox/internal/pool"
	"afe.dev/sandbox/internal/sandboxspec"
)

// Meter holds the last measured use of disk of every sandbox's volumes
// (its workspace and the volumes of its image's VOLUME paths), and the
// inodes of those and of its writable layer, by the UID of its Sandbox:
// the usage collector fills it, the Sandbox reconciler stops a sandbox
// that is over its resources.disk or its inode bound.
type Meter struct {
	// MaxInodes is --max-inodes: the inode bound of a sandbox without
	// resources.disk, and the most any sandbox gets (0: none).
	MaxInodes int64

	mu   sync.Mutex
	used map[string]Use
	// noInodes is true when the last measurement counted no inodes: the
	// engine's data is not visible here.
	noInodes bool
}

// SetInodesCounted records whether the last measurement counted inodes.
func (m *Meter) SetInodesCounted(counted bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.noInodes = !counted
}

// Bounds is true when the sandbox has a bound the meter enforces: its
// resources.disk, or an inode bound where the inodes are counted (or not
// known yet not to be).
func (m *Meter) Bounds(sbx *afev1.Sandbox) bool {
	if m == nil {
		return sbx.Spec.Resources.Disk != nil
	}
	m.mu.Lock()
	noInodes := m.noInodes
	m.mu.Unlock()
	return sbx.Spec.Resources.Disk != nil || !noInodes && m.InodeBound(sbx) > 0
}

// Use is what the volumes and the writable layer of one sandbox hold.
type Use struct {
	// bytes are its volumes'.
	bytes int64
	// inodes are its volumes' and its writable layer's, when counted.
	inodes  int64
	counted bool
	// unmeasured names a volume (or a writable layer) that could not be
	// measured: the walk of it fails, as on a path longer than the host
	// allows, which the workload can make.
	unmeasured string
}

// Set replaces the measurement.
func (m *Meter) Set(used map[string]Use) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.used = used
}

// Workspace is the last measured size of the sandbox's volumes; false when
// they were not measured, or could not be.
func (m *Meter) Workspace(uid string) (int64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, ok := m.used[uid]
	return d.bytes, ok && d.unmeasured == ""
}

// Measured is true when the sandbox's volumes were measured since this
// process started (even as unmeasurable); false on a nil meter.
func (m *Meter) Measured(uid string) bool {
	if m == nil {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.used[uid]
	return ok
}

// OverDisk says why the sandbox is over its resources.disk or its inode
// bound, when it is (overBytes, overInodes).
func (m *Meter) OverDisk(sbx *afev1.Sandbox) (string, bool) {
	if m == nil {
		return "", false
	}
	m.mu.Lock()
	d, ok := m.used[string(sbx.UID)]
	m.mu.Unlock()
	if !ok {
		return "", false
	}
	if why, over := d.overBytes(sbx); over {
		return why, true
	}
	return d.overInodes(InodeBound(sbx, m.MaxInodes))
}

// InodeBound is the sandbox's inode bound under the meter's MaxInodes; 0
// for none (sandboxspec.InodeBound).
func (m *Meter) InodeBound(sbx *afev1.Sandbox) int64 {
	if m == nil {
		return 0
	}
	return InodeBound(sbx, m.MaxInodes)
}

// InodeBound is the sandbox's inode bound under maxInodes.
func InodeBound(sbx *afev1.Sandbox, maxInodes int64) int64 {
	return sandboxspec.InodeBound(&sbx.Spec, maxInodes)
}

// overBytes says why the sandbox is over its resources.disk: its volumes
// and the most the engine keeps of its logs (and its proxy's) together
// pass the limit, or a volume of it cannot be measured, which counts as
// over: a limit that a workload could switch off by making its volume
// unmeasurable would be none.
func (d Use) overBytes(sbx *afev1.Sandbox) (string, bool) {
	limit := sbx.Spec.Resources.Disk
	switch {
	case limit == nil:
		return "", false
	case d.unmeasured != "":
		return fmt.Sprintf("The engine cannot measure %s (it reports no size, as for a path longer than the host allows), so its use of resources.disk %s is unknown",
			d.unmeasured, limit.String()), true
	}
	logs := sandboxspec.LogReserve(sbx)
	if d.bytes+logs <= limit.Value() {
		return "", false
	}
	return fmt.Sprintf("The volumes use %s and the logs may keep %s, over resources.disk %s", bytesOf(d.bytes), bytesOf(logs), limit.String()), true
}

// overInodes says why the sandbox is over its inode bound: its volumes
// and writable layer hold more inodes, or one of them cannot be counted,
// which counts as over, as for bytes. Never when the inodes were not
// counted (the engine's data is not visible here).
func (d Use) overInodes(bound int64) (string, bool) {
	switch {
	case bound <= 0 || !d.counted:
		return "", false
	case d.unmeasured != "":
		return fmt.Sprintf("The controller cannot count the inodes of %s (as for a path longer than the host allows), so its use of its bound of %d inodes is unknown",
			d.unmeasured, bound), true
	case d.inodes > bound:
		return fmt.Sprintf("The workspace, the image's volumes and the writable layer hold %d inodes (files, directories and links), over the sandbox's bound of %d inodes",
			d.inodes, bound), true
	}
	return "", false
}

// OverInodes is true when the sandbox is over its inode bound, not its
// resources.disk: the remedy differs.
func (m *Meter) OverInodes(sbx *afev1.Sandbox) bool {
	if m == nil {
		return false
	}
	m.mu.Lock()
	d, ok := m.used[string(sbx.UID)]
	m.mu.Unlock()
	if !ok {
		return false
	}
	if _, over := d.overBytes(sbx); over {
		return false
	}
	_, over := d.overInodes(m.InodeBound(sbx))
	return over
}

// bytesOf is a size as a binary quantity ("17Mi").
func bytesOf(n int64) string {
	q := resource.NewQuantity(n&^(1<<20-1), resource.BinarySI)
	return q.String()
}

// Uses are the sizes of the volumes of each sandbox of the instance
// that count against resources.disk, and the inodes of those and of its
// writable layer, by the UID of its Sandbox. A volume or container
// labelled with a Sandbox's UID is that Sandbox's; a pool member's names
// no Sandbox and is a claimant's only through its claim record
// (claimRecords): never through a status field, which a tenant may write.
func Uses(disk *docker.DiskUsage, instance string) map[string]Use {
	records := claimRecords(disk, instance)
	used := map[string]Use{}
	for name, v := range disk.Volumes {
		role := v.Labels[afev1.LabelRole]
		if v.Labels[afev1.LabelController] != instance || role != afev1.RoleWorkspace && role != afev1.RoleImageVolume {
			continue
		}
		for _, uid := range ownersOf(records, v.Labels, role) {
			d := used[uid]
			d.counted = disk.InodesCounted
			if v.Bytes < 0 {
				d.unmeasured = "volume " + name
			} else {
				d.bytes += v.Bytes
				d.inodes += max(0, v.Inodes)
			}
			used[uid] = d
		}
	}
	if disk.InodesCounted {
		addLayers(used, records, disk.Layers, instance)
	}
	return used
}

// addLayers adds the inodes of the writable layers of the sandbox
// containers and claimed members to their Sandboxes' uses. A layer whose
// walk failed is unmeasured; one whose directory the engine does not
// report (a storage driver without one) counts nothing.
func addLayers(used map[string]Use, records map[string][]claimRecord, layers map[string]docker.LayerUsage, instance string) {
	for id, l := range layers {
		role := l.Labels[afev1.LabelRole]
		if l.Labels[afev1.LabelController] != instance || role != afev1.RoleSandbox && role != afev1.RoleMember {
			continue
		}
		for _, uid := range ownersOf(records, l.Labels, role) {
			d := used[uid]
			d.counted = true
			switch {
			case l.Unmeasurable:
				d.unmeasured = "the writable layer of container " + shortID(id)
			case l.Inodes > 0:
				d.inodes += l.Inodes
			}
			used[uid] = d
		}
	}
}

// ownersOf are the UIDs of the Sandboxes an object of the labels and role
// counts for: the one it is labelled with, else the claimants of the pool
// member it belongs to.
func ownersOf(records map[string][]claimRecord, labels map[string]string, role string) []string {
	if uid := labels[afev1.LabelSandboxUID]; uid != "" {
		return []string{uid}
	}
	return claimantsOf(records, labels, role)
}

// shortID is a container ID as the engine's CLI shows it.
func shortID(id string) string { return id[:min(12, len(id))] }

// claimRecords are the instance's claim records among the volumes, each
// with the identity of the Sandbox it names, by the member name it binds:
// a record counts only under the name its Sandbox's claim reads
// (naming.Claim of the key of the namespace and name it is labelled with).
func claimRecords(disk *docker.DiskUsage, instance string) map[string][]claimRecord {
	out := map[string][]claimRecord{}
	for name, v := range disk.Volumes {
		l := v.Labels
		if l[afev1.LabelController] != instance || l[afev1.LabelRole] != afev1.RoleClaim || l[afev1.LabelSandboxUID] == "" {
			continue
		}
		id := sandboxspec.Identity{Namespace: l[afev1.LabelNamespace], Name: l[afev1.LabelSandbox],
			UID: l[afev1.LabelSandboxUID], Instance: instance}
		id.Key = naming.Key(id.Namespace, id.Name)
		if name != naming.Claim(id.Key) || !pool.OwnsRecord(id, l) {
			continue
		}
		member := l[afev1.LabelMemberName]
		out[member] = append(out[member], claimRecord{id: id, labels: l})
	}
	return out
}

// claimRecord is a claim record's labels and the Sandbox it names.
type claimRecord struct {
	id     sandboxspec.Identity
	labels map[string]string
}

// claimantsOf are the UIDs of the Sandboxes whose claim record makes the
// member's volume of the labels theirs (pool.MemberObjectOf): one, but for
// the moment two claimants race for a member, when both count it.
func claimantsOf(records map[string][]claimRecord, labels map[string]string, role string) []string {
	var uids []string
	for _, rec := range records[labels[afev1.LabelMemberName]] {
		if pool.MemberObjectOf(rec.id, rec.labels, labels, role) {
			uids = append(uids, rec.id.UID)
		}
	}
	return uids
}

// Bytes is the sandbox's resources.disk in bytes, 0 when unset.
func Bytes(sbx *afev1.Sandbox) int64 {
	if d := sbx.Spec.Resources.Disk; d != nil {
		return d.Value()
	}
	return 0
}
