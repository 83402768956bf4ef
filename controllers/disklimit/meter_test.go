package disklimit

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
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
			m := &Meter{}
			if tc.volumes != nil {
				m.Set(Uses(&docker.DiskUsage{Volumes: tc.volumes}, "default"))
			}
			why, over := m.OverDisk(s)
			if over != (tc.want != "") || !strings.Contains(why, tc.want) {
				t.Fatalf("overDisk = %q, %v; want over %v with %q", why, over, tc.want != "", tc.want)
			}
		})
	}
}

// A pool member's volumes count against a Sandbox's resources.disk only
// through the Sandbox's claim record on the engine: a record under the
// Sandbox's claim name, whose labels name the Sandbox and the member (its
// name, pool and UID). Nothing a tenant can write (a status field, a label
// of another object) attributes them.
func TestUsesAttribution(t *testing.T) {
	const member = "afe-team.agents_member-0123456789ab"
	record := func(edit func(map[string]string)) docker.VolumeUsage {
		l := map[string]string{
			afev1.LabelController: "default", afev1.LabelRole: afev1.RoleClaim, afev1.LabelNamespace: "team",
			afev1.LabelSandbox: "a", afev1.LabelSandboxUID: "uid-a", afev1.LabelPool: "agents", afev1.LabelPoolUID: "pool-uid",
			afev1.LabelMember: "container-id", afev1.LabelMemberName: member,
		}
		if edit != nil {
			edit(l)
		}
		return docker.VolumeUsage{Labels: l}
	}
	memberVol := func(role string, bytes int64, edit func(map[string]string)) docker.VolumeUsage {
		l := map[string]string{
			afev1.LabelController: "default", afev1.LabelRole: role, afev1.LabelNamespace: "team",
			afev1.LabelPool: "agents", afev1.LabelPoolUID: "pool-uid", afev1.LabelMemberName: member,
		}
		if edit != nil {
			edit(l)
		}
		return docker.VolumeUsage{Bytes: bytes, Labels: l}
	}
	claimName := "afe-team.a_claim"
	tests := map[string]struct {
		volumes map[string]docker.VolumeUsage
		want    map[string]int64 // bytes by UID; -1: unmeasured
	}{
		"the claimed member's workspace and image volumes": {
			volumes: map[string]docker.VolumeUsage{
				claimName:      record(nil),
				member + "_ws": memberVol(afev1.RoleWorkspace, 8<<20, nil),
				member + "_v":  memberVol(afev1.RoleImageVolume, 1<<20, nil),
			},
			want: map[string]int64{"uid-a": 9 << 20},
		},
		"an unclaimed member counts against no Sandbox": {
			volumes: map[string]docker.VolumeUsage{member + "_ws": memberVol(afev1.RoleWorkspace, 8<<20, nil)},
			want:    map[string]int64{},
		},
		"a member's volume the engine cannot measure": {
			volumes: map[string]docker.VolumeUsage{claimName: record(nil), member + "_ws": memberVol(afev1.RoleWorkspace, -1, nil)},
			want:    map[string]int64{"uid-a": -1},
		},
		"a record under another name than the Sandbox's claim": {
			volumes: map[string]docker.VolumeUsage{"afe-team.b_claim": record(nil), member + "_ws": memberVol(afev1.RoleWorkspace, 8<<20, nil)},
			want:    map[string]int64{},
		},
		"a record of another instance": {
			volumes: map[string]docker.VolumeUsage{
				claimName:      record(func(l map[string]string) { l[afev1.LabelController] = "other" }),
				member + "_ws": memberVol(afev1.RoleWorkspace, 8<<20, nil),
			},
			want: map[string]int64{},
		},
		"a record of no Sandbox's UID": {
			volumes: map[string]docker.VolumeUsage{
				claimName:      record(func(l map[string]string) { delete(l, afev1.LabelSandboxUID) }),
				member + "_ws": memberVol(afev1.RoleWorkspace, 8<<20, nil),
			},
			want: map[string]int64{},
		},
		"a record of another pool UID": {
			volumes: map[string]docker.VolumeUsage{
				claimName:      record(func(l map[string]string) { l[afev1.LabelPoolUID] = "other-pool" }),
				member + "_ws": memberVol(afev1.RoleWorkspace, 8<<20, nil),
			},
			want: map[string]int64{},
		},
		"a member volume of another namespace": {
			volumes: map[string]docker.VolumeUsage{
				claimName:      record(nil),
				member + "_ws": memberVol(afev1.RoleWorkspace, 8<<20, func(l map[string]string) { l[afev1.LabelNamespace] = "other" }),
			},
			want: map[string]int64{},
		},
		"a volume naming a Sandbox is that Sandbox's, not the record's": {
			volumes: map[string]docker.VolumeUsage{
				claimName:      record(nil),
				member + "_ws": memberVol(afev1.RoleWorkspace, 8<<20, func(l map[string]string) { l[afev1.LabelSandboxUID] = "uid-b" }),
			},
			want: map[string]int64{"uid-b": 8 << 20},
		},
		"the record itself and a snapshot count for nothing": {
			volumes: map[string]docker.VolumeUsage{
				claimName:      {Bytes: 1 << 20, Labels: record(nil).Labels},
				member + "_sn": memberVol(afev1.RoleSnapshot, 8<<20, nil),
			},
			want: map[string]int64{},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := map[string]int64{}
			for uid, d := range Uses(&docker.DiskUsage{Volumes: tc.volumes}, "default") {
				got[uid] = d.bytes
				if d.unmeasured != "" {
					got[uid] = -1
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("Uses (-want +got):\n%s", diff)
			}
		})
	}
}
