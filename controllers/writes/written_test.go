package writes

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

func TestWrittenStale(t *testing.T) {
	copyAt := func(rv string) *afev1.Ticket {
		return &afev1.Ticket{ObjectMeta: metav1.ObjectMeta{UID: "u", ResourceVersion: rv}}
	}
	var w Written
	if w.Stale(copyAt("1")) {
		t.Fatal("a copy of an object never written is stale")
	}
	w.Replaced("u", "1")
	w.Replaced("u", "1a") // a second write of the same reconcile
	if !w.Stale(copyAt("1")) || !w.Stale(copyAt("1a")) {
		t.Fatal("a copy a write replaced is not stale")
	}
	if w.Stale(copyAt("2")) {
		t.Fatal("the written copy is stale")
	}
	if w.Stale(copyAt("1")) {
		t.Fatal("once a newer copy was seen, an equal version is still taken as stale")
	}
	w.Replaced("u", "3")
	w.Forget("u")
	if w.Stale(copyAt("3")) {
		t.Fatal("a forgotten object is stale")
	}
}

func TestWrittenCreated(t *testing.T) {
	now := time.Now()
	key := types.NamespacedName{Namespace: "ns", Name: "s"}
	tests := map[string]struct {
		record bool
		seen   bool
		after  time.Duration
		want   bool
	}{
		"never created":             {},
		"created, not cached yet":   {record: true, after: time.Second, want: true},
		"created long ago":          {record: true, after: createdFor},
		"created and seen in cache": {record: true, seen: true, after: time.Second},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var w Written
			if tc.record {
				w.Created(key, now)
			}
			if tc.seen {
				w.Seen(key)
			}
			if got := w.RecentlyCreated(key, now.Add(tc.after)); got != tc.want {
				t.Errorf("RecentlyCreated() = %v, want %v", got, tc.want)
			}
		})
	}
}
