package plan

import (
	"fmt"
	"time"
)

// A container that exits soon after its start, again and again (a command
// that fails at once, or a workload that exits on purpose), would otherwise
// be recreated at the engine's own pace, its workspace wiped and its ticket
// requeued each time. Its recreations are spaced instead, as the kubelet
// spaces a crash-looping container's restarts.
const (
	// CrashWindow is how soon after its start a container's exit counts
	// as a crash; one that ran longer ends a run of crashes.
	CrashWindow = 10 * time.Second
	// crashBaseDelay is the wait before the second recreation in a row;
	// it doubles with each further crash, up to CrashMaxDelay.
	crashBaseDelay = 10 * time.Second
	CrashMaxDelay  = 5 * time.Minute
)

// CrashRun is a sandbox's run of crashes: the zero value is none.
type CrashRun struct {
	// Count is the crashes in a row.
	Count int
	// NotBefore is when the replacement of the last one may be made.
	NotBefore time.Time
	// Uptime is how long the last crashed container ran.
	Uptime time.Duration
}

// AfterLoss is the run once a container that started at started (zero when
// it never did) is lost at now. A loss that is no crash (a container that
// ran for CrashWindow or more, or one that disappeared, which someone with
// engine access removed) ends the run.
func (c CrashRun) AfterLoss(started, now time.Time) CrashRun {
	uptime := now.Sub(started)
	if started.IsZero() || uptime >= CrashWindow {
		return CrashRun{}
	}
	count := c.Count + 1
	return CrashRun{Count: count, Uptime: uptime, NotBefore: now.Add(CrashDelay(count))}
}

// Wait is how long the replacement must still wait at now, with the reason
// in words; zero when it may be made.
func (c CrashRun) Wait(now time.Time) (time.Duration, string) {
	if c.Count == 0 || !now.Before(c.NotBefore) {
		return 0, ""
	}
	d := c.NotBefore.Sub(now)
	return d, fmt.Sprintf("The container exited %s after its start, %d times in a row; "+
		"it is recreated with a fresh workspace in %s (crash-loop back-off)",
		c.Uptime.Round(time.Second), c.Count, d.Round(time.Second))
}

// CrashDelay is the wait before the replacement after count crashes in a
// row: none after the first.
func CrashDelay(count int) time.Duration {
	if count < 2 {
		return 0
	}
	d := crashBaseDelay
	for i := 2; i < count && d < CrashMaxDelay; i++ {
		d *= 2
	}
	return min(d, CrashMaxDelay)
}
