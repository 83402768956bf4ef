package client

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestSuspendPatch(t *testing.T) {
	now := time.Date(2026, 12, 3, 9, 4, 5, 0, time.UTC)
	tests := map[string]struct {
		suspend bool
		want    string
	}{
		"suspend": {true, `{"spec":{"suspend":true}}`},
		"resume":  {false, `{"metadata":{"annotations":{"sandbox.afe.dev/resume-requested":"2026-12-03T09:04:05Z"}},"spec":{"suspend":false}}`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := json.Marshal(SuspendPatch(tc.suspend, now))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("SuspendPatch (-want +got):\n%s", diff)
			}
		})
	}
}
