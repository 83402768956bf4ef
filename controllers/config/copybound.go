package config

import (
	"fmt"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/controllers/disklimit"
)

// CopyBytes bounds every copy into or out of the sandbox's workspace (a
// move, a restore, a snapshot), as a plain tar counts it: the engine's
// copies write a sparse file whole, its holes as real disk, so each file
// counts at its full size. It is the lower of resources.disk and the
// operator's MaxWorkspaceCopyBytes, either when the other is 0; 0 bounds
// nothing.
func (o Options) CopyBytes(sbx *afev1.Sandbox) int64 {
	disk, most := disklimit.Bytes(sbx), o.MaxWorkspaceCopyBytes
	if disk <= 0 || most > 0 && most < disk {
		return max(most, 0)
	}
	return disk
}

// CopyBound says what CopyBytes is made of, for a condition: "resources.disk
// (N bytes)" or "--max-workspace-copy-bytes (N bytes)".
func (o Options) CopyBound(sbx *afev1.Sandbox) string {
	n := o.CopyBytes(sbx)
	if n == disklimit.Bytes(sbx) {
		return fmt.Sprintf("resources.disk (%d bytes)", n)
	}
	return fmt.Sprintf("--max-workspace-copy-bytes (%d bytes)", n)
}
