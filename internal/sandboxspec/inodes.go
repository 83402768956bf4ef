package sandboxspec

import afev1 "afe.dev/sandbox/api/v1alpha1"

// The inode bound derived from resources.disk: one inode for each block a
// non-empty file takes at the least on the engine's filesystem (4 KiB), so
// that the bound holds as many files as the disk bound could if each held
// a byte, and at least MinDiskInodes, so that a small disk bound still
// holds a source tree of small files.
const (
	BytesPerInode = 4 << 10
	MinDiskInodes = 65536
)

// InodeBound is how many inodes the sandbox may hold (workspace, image
// volumes and writable layer together) under the operator's maximum
// (--max-inodes; 0 for none): resources.inodes when set, else one per
// BytesPerInode of resources.disk and at least MinDiskInodes, else the
// maximum; never more than the maximum. 0 means no bound.
func InodeBound(spec *afev1.SandboxSpec, maxInodes int64) int64 {
	var bound int64
	switch {
	case spec.Resources.Inodes != nil:
		bound = *spec.Resources.Inodes
	case spec.Resources.Disk != nil:
		bound = max(MinDiskInodes, spec.Resources.Disk.Value()/BytesPerInode)
	default:
		return max(0, maxInodes)
	}
	if maxInodes > 0 {
		bound = min(bound, maxInodes)
	}
	return bound
}
