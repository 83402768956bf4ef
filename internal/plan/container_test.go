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
		orphan bool
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
		"left by an earlier sandbox":           {have: earlier(), want: ContainerCreate, orphan: true},
		"left by an earlier, status forged":    {status: afev1.SandboxStatus{ContainerID: "c0"}, have: earlier(), want: ContainerRecordLoss, orphan: true},
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
			got := Container(ContainerInput{Status: &tc.status, Have: tc.have, ID: id, WantHash: "h1", Now: lostAt})
			if diff := cmp.Diff(tc.want, got.Action); diff != "" {
				t.Errorf("Container().Action mismatch (-want +got):\n%s", diff)
			}
			if got.RemoveOrphan != tc.orphan {
				t.Errorf("Container().RemoveOrphan = %t, want %t", got.RemoveOrphan, tc.orphan)
			}
		})
	}
}

func TestContainerActionNeedsImage(t *testing.T) {
	tests := map[ContainerAction]bool{
		ContainerKeep: false, ContainerCreate: true, ContainerRecreate: true, ContainerRecordLoss: true,
		ContainerResumeLoss: true, ContainerNotAdopted: false, ContainerStart: false,
		ContainerReplaceUnstarted: true, ContainerStopOverDisk: false,
	}
	for action, want := range tests {
		if diff := cmp.Diff(want, action.NeedsImage()); diff != "" {
			t.Errorf("%s.NeedsImage() mismatch (-want +got):\n%s", action, diff)
		}
	}
}

// The disk stop and the crash back-off are part of the plan: a sandbox over
// its disk is stopped whatever its container is doing (but another's
// container is never touched), and a loss is replaced at once or after
// the back-off its run of crashes asks.
func TestContainerDiskAndCrashes(t *testing.T) {
	id := sandboxspec.Identity{Namespace: "ns", Name: "sbx", UID: "uid-1", Ticket: "sbx", Scope: "main", Instance: "default", Key: "ns.sbx"}
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ours := func(running bool, started time.Time) *enginespec.Container {
		l := id.Labels(afev1.RoleSandbox)
		l[afev1.LabelSpecHash] = "h1"
		return &enginespec.Container{ID: "c1", Labels: l, Running: running, StartedAt: started}
	}
	others := id
	others.Instance = "other"
	notOurs := &enginespec.Container{ID: "c2", Labels: others.Labels(afev1.RoleSandbox), Running: true}
	stale := id
	stale.UID = "uid-0"
	orphan := &enginespec.Container{ID: "c0", Labels: stale.Labels(afev1.RoleSandbox), Running: true}
	lostAt := metav1.NewTime(now.Add(-time.Minute))
	pending := afev1.SandboxStatus{LastLostTime: &lostAt, Conditions: []metav1.Condition{{
		Type: afev1.ContainerReadyCondition, Status: metav1.ConditionFalse, Reason: afev1.SandboxLostReason}}}
	running := afev1.SandboxStatus{ContainerID: "c1"}
	oneCrash := CrashRun{Count: 1, Uptime: time.Second, NotBefore: now.Add(-time.Second)}
	twoCrashes := CrashRun{Count: 2, Uptime: time.Second, NotBefore: now.Add(5 * time.Second)}

	tests := map[string]struct {
		status      afev1.SandboxStatus
		have        *enginespec.Container
		overDisk    bool
		crashes     CrashRun
		want        ContainerAction
		orphan      bool
		wantCrashes int
		wait        time.Duration
	}{
		"over disk, running":                 {status: running, have: ours(true, now.Add(-time.Hour)), overDisk: true, want: ContainerStopOverDisk},
		"over disk, none":                    {overDisk: true, want: ContainerStopOverDisk},
		"over disk, lost":                    {status: running, have: ours(false, now.Add(-time.Second)), overDisk: true, want: ContainerStopOverDisk},
		"over disk, another's container":     {have: notOurs, overDisk: true, want: ContainerNotAdopted},
		"over disk, orphan first":            {have: orphan, overDisk: true, want: ContainerStopOverDisk, orphan: true},
		"exited at once, first crash":        {status: running, have: ours(false, now.Add(-time.Second)), want: ContainerRecordLoss, wantCrashes: 1},
		"exited at once, second crash":       {status: running, have: ours(false, now.Add(-time.Second)), crashes: oneCrash, want: ContainerRecordLoss, wantCrashes: 2, wait: CrashDelay(2)},
		"exited after a long run":            {status: running, have: ours(false, now.Add(-time.Hour)), crashes: twoCrashes, want: ContainerRecordLoss},
		"disappeared: no crash":              {status: running, crashes: twoCrashes, want: ContainerRecordLoss},
		"pending loss, still waiting":        {status: pending, have: ours(false, now.Add(-2*time.Minute)), crashes: twoCrashes, want: ContainerResumeLoss, wantCrashes: 2, wait: 5 * time.Second},
		"pending loss, removed meanwhile":    {status: pending, crashes: twoCrashes, want: ContainerResumeLoss},
		"running: the run is kept as it was": {status: running, have: ours(true, now.Add(-time.Second)), crashes: twoCrashes, want: ContainerKeep, wantCrashes: 2},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := Container(ContainerInput{Status: &tc.status, Have: tc.have, ID: id, WantHash: "h1",
				OverDisk: tc.overDisk, Crashes: tc.crashes, Now: now})
			if got.Action != tc.want || got.RemoveOrphan != tc.orphan {
				t.Errorf("Container() = %s (orphan %t), want %s (orphan %t)", got.Action, got.RemoveOrphan, tc.want, tc.orphan)
			}
			if got.Crashes.Count != tc.wantCrashes || got.Wait != tc.wait || (got.Wait > 0) != (got.WaitWhy != "") {
				t.Errorf("Container() crashes %d, wait %s (%q); want %d, %s", got.Crashes.Count, got.Wait, got.WaitWhy, tc.wantCrashes, tc.wait)
			}
		})
	}
}
