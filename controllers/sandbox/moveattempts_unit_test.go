package sandbox

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
)

// The transfers of a moved workspace that does not settle are spaced:
// none waits before the first, each further one twice as long as the one
// before, up to maxMoveDelay; a settled or forgotten sandbox starts over,
// and one sandbox's attempts never delay another's.
func TestMoveAttempts(t *testing.T) {
	const s = time.Second
	t0 := time.Date(2026, 12, 7, 6, 0, 0, 0, time.UTC)
	tests := map[string]struct {
		begun  []time.Duration // transfers begun, after t0
		forget bool
		at     time.Duration
		want   time.Duration
	}{
		"none begun":                          {at: 0, want: 0},
		"one begun, at once":                  {begun: []time.Duration{0}, at: 0, want: moveRetry},
		"one begun, moveRetry later":          {begun: []time.Duration{0}, at: moveRetry, want: 0},
		"two begun":                           {begun: []time.Duration{0, 2 * s}, at: 2 * s, want: 2 * moveRetry},
		"five begun, a second after the last": {begun: []time.Duration{0, 2 * s, 6 * s, 14 * s, 30 * s}, at: 31 * s, want: 16*moveRetry - s},
		"thirty begun: at most maxMoveDelay":  {begun: make([]time.Duration, 30), at: 0, want: maxMoveDelay},
		"forgotten once settled":              {begun: []time.Duration{0, 0, 0}, forget: true, at: 0, want: 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var a moveAttempts
			uid, other := types.UID("moved"), types.UID("other")
			for _, d := range tc.begun {
				a.begin(uid, t0.Add(d))
			}
			if tc.forget {
				a.forget(uid)
			}
			if diff := cmp.Diff(tc.want, a.wait(uid, t0.Add(tc.at))); diff != "" {
				t.Errorf("wait (-want +got):\n%s", diff)
			}
			if got := a.wait(other, t0.Add(tc.at)); got != 0 {
				t.Errorf("another sandbox waits %v", got)
			}
		})
	}
}
