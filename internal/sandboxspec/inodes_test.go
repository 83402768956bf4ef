package sandboxspec

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// The inode bound of a sandbox: issue 48's 500,000 empty files pass the
// bound of resources.disk 64Mi by far; the operator's maximum caps every
// bound and holds without resources.disk.
func TestInodeBound(t *testing.T) {
	const maxInodes = 1 << 20 // --max-inodes' default
	tests := map[string]struct {
		disk   string
		inodes *int64
		max    int64
		want   int64
	}{
		"64Mi: the floor, far below 500,000 files": {disk: "64Mi", max: maxInodes, want: 65536},
		"1Gi: one per 4Ki":                         {disk: "1Gi", max: maxInodes, want: 262144},
		"10Gi: capped by the maximum":              {disk: "10Gi", max: maxInodes, want: maxInodes},
		"no disk: the maximum":                     {max: maxInodes, want: maxInodes},
		"explicit, under the maximum":              {disk: "64Mi", inodes: ptr.To[int64](3000), max: maxInodes, want: 3000},
		"explicit, over the maximum: the maximum":  {inodes: ptr.To[int64](1 << 30), max: maxInodes, want: maxInodes},
		"no maximum, no disk: no bound":            {want: 0},
		"no maximum: the disk's bound":             {disk: "1Gi", want: 262144},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			spec := &afev1.SandboxSpec{}
			if tc.disk != "" {
				spec.Resources.Disk = ptr.To(resource.MustParse(tc.disk))
			}
			spec.Resources.Inodes = tc.inodes
			if got := InodeBound(spec, tc.max); got != tc.want {
				t.Errorf("InodeBound = %d, want %d", got, tc.want)
			}
		})
	}
	spec := &afev1.SandboxSpec{}
	spec.Resources.Disk = ptr.To(resource.MustParse("64Mi"))
	if got := InodeBound(spec, maxInodes); got >= 500_000 {
		t.Errorf("the bound of 64Mi is %d: the 500,000 empty files of issue 48 would not pass it", got)
	}
}
