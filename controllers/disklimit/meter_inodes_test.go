package disklimit

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/docker"
)

// What counts against a sandbox's inode bound: its workspace, its image's
// volumes and its writable layer together, only its own, and only where
// the inodes were counted; one that cannot be counted is over.
func TestOverInodes(t *testing.T) {
	labels := func(uid, role string) map[string]string {
		return map[string]string{afev1.LabelController: "default", afev1.LabelSandboxUID: uid, afev1.LabelRole: role}
	}
	vol := func(uid, role string, inodes int64) docker.VolumeUsage {
		return docker.VolumeUsage{Labels: labels(uid, role), Bytes: inodes, Inodes: inodes}
	}
	layer := func(uid string, inodes int64) docker.LayerUsage {
		return docker.LayerUsage{Labels: labels(uid, afev1.RoleSandbox), Inodes: inodes}
	}
	tests := map[string]struct {
		disk      string
		inodes    *int64
		maxInodes int64
		usage     docker.DiskUsage
		want      string // a part of the reason; empty: not over
	}{
		"under": {inodes: ptr.To[int64](3000), usage: docker.DiskUsage{InodesCounted: true,
			Volumes: map[string]docker.VolumeUsage{"ws": vol("uid-a", afev1.RoleWorkspace, 2000)},
			Layers:  map[string]docker.LayerUsage{"c": layer("uid-a", 1000)}}},
		"the workspace, the image's volumes and the layer add up": {inodes: ptr.To[int64](3000), usage: docker.DiskUsage{InodesCounted: true,
			Volumes: map[string]docker.VolumeUsage{"ws": vol("uid-a", afev1.RoleWorkspace, 2000), "vol": vol("uid-a", afev1.RoleImageVolume, 500)},
			Layers:  map[string]docker.LayerUsage{"c": layer("uid-a", 501)}},
			want: "hold 3001 inodes (files, directories and links), over the sandbox's bound of 3000 inodes"},
		"another sandbox's do not count": {inodes: ptr.To[int64](3000), usage: docker.DiskUsage{InodesCounted: true,
			Volumes: map[string]docker.VolumeUsage{"ws": vol("uid-a", afev1.RoleWorkspace, 10), "other": vol("uid-b", afev1.RoleWorkspace, 1e6)},
			Layers:  map[string]docker.LayerUsage{"c": layer("uid-b", 1e6)}}},
		"64Mi: 500,000 empty files pass the bound its disk gives": {disk: "64Mi", maxInodes: 1 << 20, usage: docker.DiskUsage{InodesCounted: true,
			Volumes: map[string]docker.VolumeUsage{"ws": {Labels: labels("uid-a", afev1.RoleWorkspace), Bytes: 216, Inodes: 500_050}}},
			want: "over the sandbox's bound of 65536 inodes"},
		"no disk: the operator's maximum": {maxInodes: 1000, usage: docker.DiskUsage{InodesCounted: true,
			Layers: map[string]docker.LayerUsage{"c": layer("uid-a", 1001)}},
			want: "bound of 1000 inodes"},
		"no disk, a layer that cannot be counted": {maxInodes: 1000, usage: docker.DiskUsage{InodesCounted: true,
			Volumes: map[string]docker.VolumeUsage{"ws": vol("uid-a", afev1.RoleWorkspace, 1)},
			Layers:  map[string]docker.LayerUsage{"0123456789abcdef": {Labels: labels("uid-a", afev1.RoleSandbox), Bytes: -1, Inodes: -1, Unmeasurable: true}}},
			want: "cannot count the inodes of the writable layer of container 0123456789ab"},
		"no disk, a volume that cannot be counted": {maxInodes: 1000, usage: docker.DiskUsage{InodesCounted: true,
			Volumes: map[string]docker.VolumeUsage{"ws": vol("uid-a", afev1.RoleWorkspace, -1)}},
			want: "cannot count the inodes of volume ws"},
		"not counted (the engine's data not visible): no bound holds": {maxInodes: 1000, usage: docker.DiskUsage{
			Volumes: map[string]docker.VolumeUsage{"ws": {Labels: labels("uid-a", afev1.RoleWorkspace), Bytes: 1, Inodes: -1}},
			Layers:  map[string]docker.LayerUsage{"c": {Labels: labels("uid-a", afev1.RoleSandbox), Inodes: -1}}}},
		"no bound at all": {usage: docker.DiskUsage{InodesCounted: true,
			Volumes: map[string]docker.VolumeUsage{"ws": vol("uid-a", afev1.RoleWorkspace, 1e6)}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			sbx := &afev1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "a", UID: "uid-a"}}
			if tc.disk != "" {
				sbx.Spec.Resources.Disk = ptr.To(resource.MustParse(tc.disk))
			}
			sbx.Spec.Resources.Inodes = tc.inodes
			m := &Meter{MaxInodes: tc.maxInodes}
			m.Set(Uses(&tc.usage, "default"))
			why, over := m.OverDisk(sbx)
			if over != (tc.want != "") || !strings.Contains(why, tc.want) {
				t.Errorf("OverDisk = %q, %v; want a reason with %q", why, over, tc.want)
			}
			if m.OverInodes(sbx) != over {
				t.Errorf("OverInodes = %v, want %v: the bytes are under their limit", !over, over)
			}
		})
	}
}

// A claimed member's writable layer counts for the Sandbox its claim
// record binds, as its volumes do; an unclaimed member's, and a proxy's,
// for no one.
func TestUsesMemberLayer(t *testing.T) {
	const member = "afe-team.agents-m1"
	memberLabels := func(role string) map[string]string {
		return map[string]string{
			afev1.LabelController: "default", afev1.LabelRole: role, afev1.LabelNamespace: "team",
			afev1.LabelPool: "agents", afev1.LabelPoolUID: "pool-uid", afev1.LabelMemberName: member,
		}
	}
	record := docker.VolumeUsage{Labels: map[string]string{
		afev1.LabelController: "default", afev1.LabelRole: afev1.RoleClaim, afev1.LabelNamespace: "team",
		afev1.LabelSandbox: "a", afev1.LabelSandboxUID: "uid-a", afev1.LabelPool: "agents", afev1.LabelPoolUID: "pool-uid",
		afev1.LabelMember: "container-id", afev1.LabelMemberName: member,
	}}
	usage := &docker.DiskUsage{InodesCounted: true,
		Volumes: map[string]docker.VolumeUsage{
			"afe-team.a_claim": record,
			member + "_ws":     {Labels: memberLabels(afev1.RoleWorkspace), Inodes: 100},
		},
		Layers: map[string]docker.LayerUsage{
			"member":  {Labels: memberLabels(afev1.RoleMember), Inodes: 500},
			"proxy":   {Labels: memberLabels(afev1.RoleProxy), Inodes: 7000},
			"another": {Labels: map[string]string{afev1.LabelController: "default", afev1.LabelRole: afev1.RoleMember, afev1.LabelNamespace: "team", afev1.LabelPool: "agents", afev1.LabelPoolUID: "pool-uid", afev1.LabelMemberName: "afe-team.agents-m2"}, Inodes: 9000},
		},
	}
	got := map[string]int64{}
	for uid, d := range Uses(usage, "default") {
		got[uid] = d.inodes
	}
	if len(got) != 1 || got["uid-a"] != 600 {
		t.Fatalf("inodes by UID %v, want uid-a's 600 only", got)
	}
}
