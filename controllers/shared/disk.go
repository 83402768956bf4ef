package shared

import (
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/resource"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/docker"
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
// that count against resources.disk, by the UID of its Sandbox.
func DiskUses(disk *docker.DiskUsage, instance string) map[string]DiskUse {
	used := map[string]DiskUse{}
	for name, v := range disk.Volumes {
		role := v.Labels[afev1.LabelRole]
		if v.Labels[afev1.LabelController] != instance || role != afev1.RoleWorkspace && role != afev1.RoleImageVolume {
			continue
		}
		uid := v.Labels[afev1.LabelSandboxUID]
		d := used[uid]
		if v.Bytes < 0 {
			d.unmeasured = name
		} else {
			d.bytes += v.Bytes
		}
		used[uid] = d
	}
	return used
}

// DiskBytes is the sandbox's resources.disk in bytes, 0 when unset: the
// bound of the copies into and out of its workspace (snapshots), as a
// plain tar counts them (a sparse file at its full size).
func DiskBytes(sbx *afev1.Sandbox) int64 {
	if d := sbx.Spec.Resources.Disk; d != nil {
		return d.Value()
	}
	return 0
}
