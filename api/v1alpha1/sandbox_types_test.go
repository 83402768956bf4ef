package v1alpha1

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The patch a resume request sends: the annotation at the time asked, in
// UTC, and nothing else.
func TestResumeRequestPatch(t *testing.T) {
	now := time.Date(2026, 12, 3, 9, 4, 5, 600, time.FixedZone("CET", 3600))
	got, err := json.Marshal(ResumeRequestPatch(now))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"metadata":{"annotations":{"sandbox.afe.dev/resume-requested":"2026-12-03T08:04:05Z"}}}`
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("ResumeRequestPatch (-want +got):\n%s", diff)
	}
}
