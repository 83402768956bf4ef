package move

import (
	"testing"
	"time"
)

func TestNewestSnapshot(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 22, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		found []PeerSnapshot
		want  PeerSnapshot
		ok    bool
	}{
		{name: "none", found: nil, ok: false},
		{name: "one", found: []PeerSnapshot{{Node: "a", Volume: "v1", Created: t0}}, want: PeerSnapshot{Node: "a", Volume: "v1", Created: t0}, ok: true},
		{name: "the most recent across nodes", found: []PeerSnapshot{
			{Node: "a", Volume: "v2", Created: t0.Add(time.Minute)},
			{Node: "b", Volume: "v1", Created: t0.Add(2 * time.Minute)},
			{Node: "a", Volume: "v3", Created: t0},
		}, want: PeerSnapshot{Node: "b", Volume: "v1", Created: t0.Add(2 * time.Minute)}, ok: true},
		{name: "a tie goes to the first node and name, whatever the order", found: []PeerSnapshot{
			{Node: "b", Volume: "v1", Created: t0},
			{Node: "a", Volume: "v9", Created: t0},
			{Node: "a", Volume: "v2", Created: t0},
		}, want: PeerSnapshot{Node: "a", Volume: "v2", Created: t0}, ok: true},
		{name: "an engine that gives no time loses to one that does", found: []PeerSnapshot{
			{Node: "a", Volume: "v1"},
			{Node: "b", Volume: "v1", Created: t0},
		}, want: PeerSnapshot{Node: "b", Volume: "v1", Created: t0}, ok: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := NewestSnapshot(tc.found)
			if ok != tc.ok || got != tc.want {
				t.Errorf("NewestSnapshot = %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
