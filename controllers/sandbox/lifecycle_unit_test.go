package sandbox

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/activity"
)

func TestLastActivity(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	created := now.Add(-time.Hour)
	at := func(d time.Duration) *metav1.Time { return &metav1.Time{Time: now.Add(d)} }
	tests := map[string]struct {
		status     afev1.SandboxStatus
		annotation string
		exec       time.Duration // seen in the engine's events, before now
		runEnds    []*metav1.Time
		want       time.Time
	}{
		"nothing but its creation": {want: created},
		"ready":                    {status: afev1.SandboxStatus{ReadyTime: at(-50 * time.Minute)}, want: now.Add(-50 * time.Minute)},
		"recorded":                 {status: afev1.SandboxStatus{LastActivityTime: at(-10 * time.Minute), ReadyTime: at(-50 * time.Minute)}, want: now.Add(-10 * time.Minute)},
		"an exec seen later":       {status: afev1.SandboxStatus{LastActivityTime: at(-10 * time.Minute)}, exec: -time.Minute, want: now.Add(-time.Minute)},
		"a Run ended later":        {status: afev1.SandboxStatus{LastActivityTime: at(-10 * time.Minute)}, runEnds: []*metav1.Time{at(-20 * time.Minute), at(-2 * time.Minute), nil}, want: now.Add(-2 * time.Minute)},
		"a forged future record is now, no later":  {status: afev1.SandboxStatus{LastActivityTime: at(24 * time.Hour)}, want: now},
		"a resume asked for":                       {status: afev1.SandboxStatus{LastActivityTime: at(-10 * time.Minute)}, annotation: now.Add(-5 * time.Second).Format(time.RFC3339), want: now.Add(-5 * time.Second)},
		"a resume asked for in the future is none": {status: afev1.SandboxStatus{LastActivityTime: at(-10 * time.Minute)}, annotation: now.Add(time.Hour).Format(time.RFC3339), want: now.Add(-10 * time.Minute)},
		"a resume that is no time":                 {status: afev1.SandboxStatus{LastActivityTime: at(-10 * time.Minute)}, annotation: "soon", want: now.Add(-10 * time.Minute)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := &Reconciler{Activity: &activity.Log{}}
			sbx := &afev1.Sandbox{Status: tc.status}
			sbx.UID, sbx.CreationTimestamp = "uid-1", metav1.Time{Time: created}
			if tc.annotation != "" {
				sbx.Annotations = map[string]string{afev1.ResumeRequestedAnnotation: tc.annotation}
			}
			if tc.exec != 0 {
				r.Activity.Saw("uid-1", now.Add(tc.exec))
				r.Activity.Saw("uid-other", now) // another sandbox's
			}
			var runs []afev1.Run
			for _, end := range tc.runEnds {
				runs = append(runs, afev1.Run{Status: afev1.RunStatus{CompletionTime: end}})
			}
			if diff := cmp.Diff(tc.want, r.lastActivity(sbx, runs, now)); diff != "" {
				t.Errorf("lastActivity() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRecordActivityRoundsUp(t *testing.T) {
	base := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	st := &afev1.SandboxStatus{}
	recordActivity(st, base.Add(300*time.Millisecond))
	if diff := cmp.Diff(base.Add(time.Second), st.LastActivityTime.Time); diff != "" {
		t.Errorf("rounded (-want +got):\n%s", diff)
	}
	recordActivity(st, base) // earlier: kept
	if diff := cmp.Diff(base.Add(time.Second), st.LastActivityTime.Time); diff != "" {
		t.Errorf("moved back (-want +got):\n%s", diff)
	}
}
