package shared

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/sandboxspec"
)

// What counts against resources.disk: the sandbox's workspace and image
// volumes, the bound of its logs, and a volume the engine cannot measure
// makes it over the limit.
func TestOverDisk(t *testing.T) {
	sbx := &afev1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "a", UID: "uid-a"}}
	sbx.Spec.Resources.Disk = ptr.To(resource.MustParse("16Mi"))
	logs := sandboxspec.LogReserve(sbx)
	vol := func(uid, role string, bytes int64) docker.VolumeUsage {
		return docker.VolumeUsage{Bytes: bytes, Labels: map[string]string{
			afev1.LabelController: "default", afev1.LabelSandboxUID: uid, afev1.LabelRole: role,
		}}
	}
	tests := map[string]struct {
		volumes map[string]docker.VolumeUsage
		noLimit bool
		want    string // a part of the reason; empty: not over
	}{
		"not measured yet": {},
		"under":            {volumes: map[string]docker.VolumeUsage{"ws": vol("uid-a", afev1.RoleWorkspace, 8<<20)}},
		"over":             {volumes: map[string]docker.VolumeUsage{"ws": vol("uid-a", afev1.RoleWorkspace, 17<<20)}, want: "The volumes use 17Mi"},
		"under, but not with the logs' bound": {
			volumes: map[string]docker.VolumeUsage{"ws": vol("uid-a", afev1.RoleWorkspace, 16<<20-logs+1)}, want: "over resources.disk 16Mi",
		},
		"the image's volumes count": {
			volumes: map[string]docker.VolumeUsage{
				"ws":  vol("uid-a", afev1.RoleWorkspace, 8<<20),
				"vol": vol("uid-a", afev1.RoleImageVolume, 8<<20),
			},
			want: "The volumes use 16Mi",
		},
		"another sandbox's volumes do not": {
			volumes: map[string]docker.VolumeUsage{
				"ws":    vol("uid-a", afev1.RoleWorkspace, 8<<20),
				"other": vol("uid-b", afev1.RoleWorkspace, 64<<20),
				"snap":  vol("uid-a", afev1.RoleSnapshot, 64<<20),
			},
		},
		"a volume the engine cannot measure": {
			volumes: map[string]docker.VolumeUsage{
				"ws":  vol("uid-a", afev1.RoleWorkspace, -1),
				"vol": vol("uid-a", afev1.RoleImageVolume, 1<<20),
			},
			want: "cannot measure volume ws",
		},
		"unmeasurable, without a limit": {
			volumes: map[string]docker.VolumeUsage{"ws": vol("uid-a", afev1.RoleWorkspace, -1)}, noLimit: true,
		},
		"another instance's volume of the UID does not count": {
			volumes: map[string]docker.VolumeUsage{"ws": {Bytes: -1, Labels: map[string]string{
				afev1.LabelController: "other", afev1.LabelSandboxUID: "uid-a", afev1.LabelRole: afev1.RoleWorkspace,
			}}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := sbx.DeepCopy()
			if tc.noLimit {
				s.Spec.Resources.Disk = nil
			}
			m := &DiskMeter{}
			if tc.volumes != nil {
				m.Set(DiskUses(&docker.DiskUsage{Volumes: tc.volumes}, "default"))
			}
			why, over := m.OverDisk(s)
			if over != (tc.want != "") || !strings.Contains(why, tc.want) {
				t.Fatalf("overDisk = %q, %v; want over %v with %q", why, over, tc.want != "", tc.want)
			}
		})
	}
}
