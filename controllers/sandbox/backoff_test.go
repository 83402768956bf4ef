package sandbox

import (
	"testing"
	"time"
)

func TestCrashDelay(t *testing.T) {
	for count, want := range map[int]time.Duration{
		0: 0, 1: 0, 2: 10 * time.Second, 3: 20 * time.Second, 4: 40 * time.Second,
		6: 160 * time.Second, 7: crashMaxDelay, 60: crashMaxDelay,
	} {
		if got := crashDelay(count); got != want {
			t.Errorf("crashDelay(%d) = %s, want %s", count, got, want)
		}
	}
}

func TestCrashBackoff(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	var b crashBackoff
	b.lost("u", at(0), at(1)) // first crash: replaced at once
	if d, _ := b.wait("u", at(1)); d != 0 {
		t.Fatalf("after one crash: wait %s, want none", d)
	}
	b.lost("u", at(2), at(3)) // second in a row: 10 s
	d, why := b.wait("u", at(4))
	if d != 9*time.Second || why == "" {
		t.Fatalf("after two crashes: wait %s (%q), want 9s with a reason", d, why)
	}
	if d, _ := b.wait("other", at(4)); d != 0 {
		t.Fatalf("another sandbox waits %s", d)
	}
	if d, _ := b.wait("u", at(13)); d != 0 {
		t.Fatalf("the wait is over at 13 s; got %s", d)
	}
	// A container that ran past the window ends the run.
	b.lost("u", at(13), at(13+crashWindow.Seconds()))
	b.lost("u", at(40), at(41))
	if d, _ := b.wait("u", at(41)); d != 0 {
		t.Fatalf("first crash after a long run: wait %s, want none", d)
	}
	// So does a container that disappeared (it never crashed).
	b.lost("u", at(42), at(43))
	b.lost("u", time.Time{}, at(50))
	if d, _ := b.wait("u", at(50)); d != 0 {
		t.Fatalf("after a disappearance: wait %s, want none", d)
	}
	b.lost("u", at(51), at(52))
	b.lost("u", at(52), at(53))
	b.forget("u")
	if d, _ := b.wait("u", at(53)); d != 0 {
		t.Fatalf("forgotten: wait %s", d)
	}
}
