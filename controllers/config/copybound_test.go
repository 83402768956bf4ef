package config

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// Every copy of a workspace is bounded by the lower of resources.disk and
// --max-workspace-copy-bytes: a sandbox without resources.disk is bounded
// by the operator's maximum alone, never by nothing while that is set.
func TestCopyBytes(t *testing.T) {
	type bound struct {
		Bytes int64
		Says  string
	}
	tests := map[string]struct {
		disk string
		most int64
		want bound
	}{
		"no disk, the operator's maximum": {most: 1 << 30, want: bound{1 << 30, "--max-workspace-copy-bytes (1073741824 bytes)"}},
		"a disk below the maximum":        {disk: "16Mi", most: 1 << 30, want: bound{16 << 20, "resources.disk (16777216 bytes)"}},
		"a disk above the maximum":        {disk: "4Gi", most: 1 << 30, want: bound{1 << 30, "--max-workspace-copy-bytes (1073741824 bytes)"}},
		"a disk, no maximum":              {disk: "4Gi", want: bound{4 << 30, "resources.disk (4294967296 bytes)"}},
		"neither bounds nothing":          {want: bound{0, "resources.disk (0 bytes)"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			sbx := &afev1.Sandbox{}
			if tc.disk != "" {
				sbx.Spec.Resources.Disk = ptr.To(resource.MustParse(tc.disk))
			}
			o := Options{MaxWorkspaceCopyBytes: tc.most}
			if diff := cmp.Diff(tc.want, bound{o.CopyBytes(sbx), o.CopyBound(sbx)}); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
