package sandbox

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/controllers/disklimit"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/enginespec"
	"afe.dev/sandbox/internal/naming"
	"afe.dev/sandbox/internal/pool"
	"afe.dev/sandbox/internal/sandboxspec"
)

// A claimed member stopped over its resources.disk is kept stopped while
// it is measured over its limit, or not measured since this process
// started; it is started again once measured under it, or without a
// limit; and only a stopped member its record binds, with the condition
// written before the stop, counts as one.
func TestClaimedOverDisk(t *testing.T) {
	sbx := &afev1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "a", UID: "uid-a"}}
	sbx.Spec.Resources.Disk = ptr.To(resource.MustParse("16Mi"))
	id := sandboxspec.IdentityOf(sbx, "default")
	member := &enginespec.Container{ID: "member-id", Name: naming.Container(id.Key), Labels: map[string]string{
		afev1.LabelRole: afev1.RoleMember, afev1.LabelNamespace: "team", afev1.LabelController: "default",
		afev1.LabelPool: "agents", afev1.LabelPoolUID: "pool-uid", afev1.LabelMemberName: "afe-team.agents_member-0123456789ab",
	}}
	record := pool.RecordLabels(id, pool.Choice{Pool: "agents", PoolUID: "pool-uid",
		Member: &pool.Member{Container: enginespec.Container{ID: "member-id", Name: "afe-team.agents_member-0123456789ab"}}})
	overDisk := []metav1.Condition{{Type: afev1.ContainerReadyCondition, Status: metav1.ConditionFalse, Reason: afev1.DiskQuotaExceededReason}}
	measured := func(bytes int64) *disklimit.Meter {
		m := &disklimit.Meter{}
		m.Set(disklimit.Uses(&docker.DiskUsage{Volumes: map[string]docker.VolumeUsage{"ws": {Bytes: bytes, Labels: map[string]string{
			afev1.LabelController: "default", afev1.LabelSandboxUID: "uid-a", afev1.LabelRole: afev1.RoleWorkspace,
		}}}}, "default"))
		return m
	}
	tests := map[string]struct {
		conditions []metav1.Condition
		running    bool
		foreign    bool // the record names another member
		noLimit    bool
		meter      *disklimit.Meter
		kept       bool
		resumed    bool
	}{
		"over its limit":                       {conditions: overDisk, meter: measured(32 << 20), kept: true},
		"not measured since the start":         {conditions: overDisk, meter: &disklimit.Meter{}, kept: true},
		"measured under it (a raised limit)":   {conditions: overDisk, meter: measured(1 << 20), resumed: true},
		"its limit removed":                    {conditions: overDisk, meter: measured(32 << 20), noLimit: true, resumed: true},
		"no meter":                             {conditions: overDisk, resumed: true},
		"running: the stop is the phase's":     {conditions: overDisk, running: true, meter: measured(32 << 20)},
		"stopped without the condition (lost)": {meter: measured(32 << 20)},
		"a member its record does not bind":    {conditions: overDisk, foreign: true, meter: measured(32 << 20)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := &sandboxScope{sbx: sbx.DeepCopy(), id: id}
			s.sbx.Status.Conditions = tc.conditions
			if tc.noLimit {
				s.sbx.Spec.Resources.Disk = nil
			}
			c := *member
			c.Running = tc.running
			rec := record
			if tc.foreign {
				rec = map[string]string{}
				for k, v := range record {
					rec[k] = v
				}
				rec[afev1.LabelMember] = "another-id"
			}
			v := pool.ClaimView{Sandbox: id, Record: rec, Named: &c}
			r := &Reconciler{Disk: tc.meter}
			if got := r.keptOverDisk(s, v); got != tc.kept {
				t.Errorf("keptOverDisk = %v, want %v", got, tc.kept)
			}
			if got := r.resumeClaimed(s, v); got != tc.resumed {
				t.Errorf("resumeClaimed = %v, want %v", got, tc.resumed)
			}
		})
	}
}
