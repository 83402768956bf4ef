package plan

import (
	"testing"
	"time"
)

func TestCrashDelay(t *testing.T) {
	for count, want := range map[int]time.Duration{
		0: 0, 1: 0, 2: 10 * time.Second, 3: 20 * time.Second, 4: 40 * time.Second,
		6: 160 * time.Second, 7: CrashMaxDelay, 60: CrashMaxDelay,
	} {
		if got := CrashDelay(count); got != want {
			t.Errorf("CrashDelay(%d) = %s, want %s", count, got, want)
		}
	}
}

func TestCrashRun(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	var run CrashRun
	run = run.AfterLoss(at(0), at(1)) // first crash: replaced at once
	if d, _ := run.Wait(at(1)); d != 0 {
		t.Fatalf("after one crash: wait %s, want none", d)
	}
	run = run.AfterLoss(at(2), at(3)) // second in a row: 10 s
	d, why := run.Wait(at(4))
	if d != 9*time.Second || why == "" {
		t.Fatalf("after two crashes: wait %s (%q), want 9s with a reason", d, why)
	}
	if d, _ := (CrashRun{}).Wait(at(4)); d != 0 {
		t.Fatalf("no run waits %s", d)
	}
	if d, _ := run.Wait(at(13)); d != 0 {
		t.Fatalf("the wait is over at 13 s; got %s", d)
	}
	// A container that ran past the window ends the run.
	run = run.AfterLoss(at(13), at(13+CrashWindow.Seconds()))
	run = run.AfterLoss(at(40), at(41))
	if d, _ := run.Wait(at(41)); d != 0 {
		t.Fatalf("first crash after a long run: wait %s, want none", d)
	}
	// So does a container that disappeared (it never crashed).
	run = run.AfterLoss(at(42), at(43))
	run = run.AfterLoss(time.Time{}, at(50))
	if d, _ := run.Wait(at(50)); d != 0 || run.Count != 0 {
		t.Fatalf("after a disappearance: wait %s, count %d, want none", d, run.Count)
	}
}
