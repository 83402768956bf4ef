package shared

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

// DiskMeter holds the last measured use of disk of every sandbox's volumes
// (its workspace and the volumes of its image's VOLUME paths), by the UID
// of its Sandbox: the usage collector fills it, the Sandbox reconciler
// stops a sandbox that is over its resources.disk.
type DiskMeter struct {
	mu   sync.Mutex
	used map[string]DiskUse
}

// DiskUse is what the volumes of one sandbox hold.
type DiskUse struct {
	bytes int64
	// unmeasured names a volume whose size the engine could not tell: it
	// reports -1 when its walk of the volume fails, as on a path longer
	// than the host allows, which the workload can make.
	unmeasured string
}

// Set replaces the measurement.
func (m *DiskMeter) Set(used map[string]DiskUse) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.used = used
}

// Workspace is the last measured size of the sandbox's volumes; false when
// they were not measured, or could not be.
func (m *DiskMeter) Workspace(uid string) (int64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, ok := m.used[uid]
	return d.bytes, ok && d.unmeasured == ""
}

// Measured is true when the sandbox's volumes were measured since this
// process started (even as unmeasurable); false on a nil meter.
func (m *DiskMeter) Measured(uid string) bool {
	if m == nil {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.used[uid]
	return ok
}

// OverDisk says why the sandbox is over its resources.disk, when it is:
// its volumes and the most the engine keeps of its logs (and its proxy's)
// together pass the limit, or a volume of it cannot be measured, which
// counts as over: a limit that a workload could switch off by making its
// volume unmeasurable would be none.
func (m *DiskMeter) OverDisk(sbx *afev1.Sandbox) (string, bool) {
	if m == nil || sbx.Spec.Resources.Disk == nil {
		return "", false
	}
	m.mu.Lock()
	d, ok := m.used[string(sbx.UID)]
	m.mu.Unlock()
	limit := sbx.Spec.Resources.Disk
	switch {
	case !ok:
		return "", false
	case d.unmeasured != "":
		return fmt.Sprintf("The engine cannot measure volume %s (it reports no size, as for a path longer than the host allows), so its use of resources.disk %s is unknown",
			d.unmeasured, limit.String()), true
	}
	logs := sandboxspec.LogReserve(sbx)
	if d.bytes+logs <= limit.Value() {
		return "", false
	}
	return fmt.Sprintf("The volumes use %s and the logs may keep %s, over resources.disk %s", bytesOf(d.bytes), bytesOf(logs), limit.String()), true
}

// bytesOf is a size as a binary quantity ("17Mi").
func bytesOf(n int64) string {
	q := resource.NewQuantity(n&^(1<<20-1), resource.BinarySI)
	return q.String()
}

// DiskUses are the sizes of the volumes of each sandbox of the instance
// that count against resources.disk, by the UID of its Sandbox. A volume
// labelled with a Sandbox's UID is that Sandbox's; a pool member's volume
// names no Sandbox and is a claimant's only through its claim record
// (claimRecords): never through a status field, which a tenant may write.
func DiskUses(disk *docker.DiskUsage, instance string) map[string]DiskUse {
	records := claimRecords(disk, instance)
	used := map[string]DiskUse{}
	for name, v := range disk.Volumes {
		role := v.Labels[afev1.LabelRole]
		if v.Labels[afev1.LabelController] != instance || role != afev1.RoleWorkspace && role != afev1.RoleImageVolume {
			continue
		}
		uids := []string{v.Labels[afev1.LabelSandboxUID]}
		if uids[0] == "" {
			uids = claimantsOf(records, v.Labels, role)
		}
		for _, uid := range uids {
			d := used[uid]
			if v.Bytes < 0 {
				d.unmeasured = name
			} else {
				d.bytes += v.Bytes
			}
			used[uid] = d
		}
	}
	return used
}

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

// DiskBytes is the sandbox's resources.disk in bytes, 0 when unset.
func DiskBytes(sbx *afev1.Sandbox) int64 {
	if d := sbx.Spec.Resources.Disk; d != nil {
		return d.Value()
	}
	return 0
}
