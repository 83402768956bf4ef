package sandbox

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"afe.dev/sandbox/internal/activity"
	"afe.dev/sandbox/internal/plan"
)

// forget drops everything the reconciler remembers of a Sandbox, and only
// of that Sandbox; the record of its finalization outlives it.
func TestForget(t *testing.T) {
	now := time.Now()
	r := &Reconciler{Activity: &activity.Log{}}
	for _, uid := range []types.UID{"gone", "kept"} {
		r.mem.written.record(uid, "c1")
		r.mem.crashes.set(uid, plan.CrashRun{}.AfterLoss(now.Add(-2*time.Second), now.Add(-time.Second)).AfterLoss(now.Add(-time.Second), now))
		r.mem.legacyChecked.Store(uid, true)
		r.mem.egressGone.Store(uid, true)
		r.Activity.Saw(string(uid), now)
	}
	r.forget("gone")
	r.mem.rememberFinalized("gone")

	remembers := func(uid types.UID) map[string]bool {
		_, legacy := r.mem.legacyChecked.Load(uid)
		_, egress := r.mem.egressGone.Load(uid)
		wait, _ := r.mem.crashes.run(uid).Wait(now)
		return map[string]bool{
			"written":       r.mem.written.wrote(uid, "c1"),
			"crashes":       wait > 0,
			"legacyChecked": legacy,
			"egressGone":    egress,
			"activity":      !r.Activity.Last(uid).IsZero(),
		}
	}
	for what, kept := range remembers("gone") {
		if kept {
			t.Errorf("%s of the forgotten Sandbox is still remembered", what)
		}
	}
	for what, kept := range remembers("kept") {
		if !kept {
			t.Errorf("%s of another Sandbox was forgotten", what)
		}
	}
	if !r.mem.wasFinalized("gone") || r.mem.wasFinalized("kept") {
		t.Error("only the finalized Sandbox is remembered as finalized")
	}
}
