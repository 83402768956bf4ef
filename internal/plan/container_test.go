package plan

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/enginespec"
	"afe.dev/sandbox/internal/sandboxspec"
)

func TestContainer(t *testing.T) {
	id := sandboxspec.Identity{Namespace: "ns", Name: "sbx", UID: "uid-1", Ticket: "sbx", Scope: "main", Instance: "default", Key: "ns.sbx"}
	lostAt := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ours := func(running bool, hash string, started time.Time) *enginespec.Container {
		l := id.Labels(afev1.RoleSandbox)
		l[afev1.LabelSpecHash] = hash
		return &enginespec.Container{ID: "c1", Labels: l, Running: running, StartedAt: started}
	}
	earlier := func() *enginespec.Container {
		old := id
		old.UID = "uid-0"
		return &enginespec.Container{ID: "c0", Labels: old.Labels(afev1.RoleSandbox), Running: true}
	}
	others := func() *enginespec.Container {
		other := id
		other.Instance = "other"
		return &enginespec.Container{ID: "c2", Labels: other.Labels(afev1.RoleSandbox), Running: true}
	}
	proxy := &enginespec.Container{ID: "p", Labels: id.Labels(afev1.RoleProxy), Running: true}
	lost := func(status metav1.ConditionStatus) afev1.SandboxStatus {
		return afev1.SandboxStatus{
			LastLostTime: &metav1.Time{Time: lostAt},
			Conditions:   []metav1.Condition{{Type: afev1.ContainerReadyCondition, Status: status, Reason: afev1.SandboxLostReason}},
		}
	}
	suspended := afev1.SandboxStatus{
		ContainerID: "c1",
		Conditions:  []metav1.Condition{{Type: afev1.ContainerReadyCondition, Status: metav1.ConditionFalse, Reason: afev1.SuspendedReason}},
	}
	tests := map[string]struct {
		status afev1.SandboxStatus
		have   *enginespec.Container
		want   ContainerAction
	}{
		"new sandbox":                          {want: ContainerCreate},
		"running and matching":                 {status: afev1.SandboxStatus{ContainerID: "c1"}, have: ours(true, "h1", lostAt), want: ContainerKeep},
		"drifted":                              {status: afev1.SandboxStatus{ContainerID: "c1"}, have: ours(true, "h0", lostAt), want: ContainerRecreate},
		"exited":                               {status: afev1.SandboxStatus{ContainerID: "c1"}, have: ours(false, "h1", lostAt), want: ContainerRecordLoss},
		"exited and drifted":                   {status: afev1.SandboxStatus{ContainerID: "c1"}, have: ours(false, "h0", lostAt), want: ContainerRecordLoss},
		"disappeared":                          {status: afev1.SandboxStatus{ContainerID: "c1"}, want: ContainerRecordLoss},
		"loss recorded, none yet":              {status: lost(metav1.ConditionFalse), want: ContainerResumeLoss},
		"loss recorded, old one left":          {status: lost(metav1.ConditionFalse), have: ours(false, "h1", lostAt.Add(-time.Hour)), want: ContainerResumeLoss},
		"loss recorded, started before":        {status: lost(metav1.ConditionFalse), have: ours(true, "h1", lostAt.Add(-time.Second)), want: ContainerResumeLoss},
		"loss recorded, replacement":           {status: lost(metav1.ConditionFalse), have: ours(true, "h1", lostAt.Add(time.Second)), want: ContainerKeep},
		"loss recorded, replacement drifted":   {status: lost(metav1.ConditionFalse), have: ours(true, "h0", lostAt.Add(time.Second)), want: ContainerRecreate},
		"loss over (condition True)":           {status: lost(metav1.ConditionTrue), have: ours(true, "h1", lostAt.Add(-time.Second)), want: ContainerKeep},
		"left by an earlier sandbox":           {status: afev1.SandboxStatus{ContainerID: "c0"}, have: earlier(), want: ContainerRemoveOrphan},
		"another instance's":                   {have: others(), want: ContainerNotAdopted},
		"ours in another role":                 {have: proxy, want: ContainerNotAdopted},
		"unlabelled":                           {have: &enginespec.Container{ID: "x", Running: true}, want: ContainerNotAdopted},
		"suspended, stopped":                   {status: suspended, have: ours(false, "h1", lostAt), want: ContainerStart},
		"suspended, stopped and drifted":       {status: suspended, have: ours(false, "h0", lostAt), want: ContainerRecreate},
		"suspended, removed meanwhile":         {status: suspended, want: ContainerRecordLoss},
		"suspended, running":                   {status: suspended, have: ours(true, "h1", lostAt), want: ContainerKeep},
		"created, never started":               {have: ours(false, "h1", time.Time{}), want: ContainerReplaceUnstarted},
		"created, never started, status set":   {status: afev1.SandboxStatus{ContainerID: "c1"}, have: ours(false, "h1", time.Time{}), want: ContainerReplaceUnstarted},
		"loss recorded, replacement unstarted": {status: lost(metav1.ConditionFalse), have: ours(false, "h1", time.Time{}), want: ContainerResumeLoss},
		"suspended, another instance's":        {status: suspended, have: others(), want: ContainerNotAdopted},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := Container(&tc.status, tc.have, id, "h1")
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Container() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestContainerActionNeedsImage(t *testing.T) {
	tests := map[ContainerAction]bool{
		ContainerKeep: false, ContainerCreate: true, ContainerRecreate: true, ContainerRecordLoss: true,
		ContainerResumeLoss: true, ContainerRemoveOrphan: false, ContainerNotAdopted: false, ContainerStart: false,
		ContainerReplaceUnstarted: true,
	}
	for action, want := range tests {
		if diff := cmp.Diff(want, action.NeedsImage()); diff != "" {
			t.Errorf("%s.NeedsImage() mismatch (-want +got):\n%s", action, diff)
		}
	}
}
