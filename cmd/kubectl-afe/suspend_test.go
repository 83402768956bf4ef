package main

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestSuspendPatch(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))
	tests := map[string]struct {
		suspend bool
		want    string
	}{
		"suspend": {suspend: true, want: `{"spec":{"suspend":true}}`},
		"resume":  {suspend: false, want: `{"metadata":{"annotations":{"sandbox.afe.dev/resume-requested":"2026-01-02T02:04:05Z"}},"spec":{"suspend":false}}`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := suspendPatch(tc.suspend, now)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("suspendPatch() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
