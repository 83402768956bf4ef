package metrics

import afev1 "afe.dev/sandbox/api/v1alpha1"

// init serves the label values every manager comes to at 0 from its start.
// A series that first appears with its first observation already counted
// hides that observation from rate() and increase(), which see no change:
// a manager's first sandbox, Run or loss would be missing from the
// dashboard and the alerts' ratios.
func init() {
	for _, egress := range []string{"false", "true"} {
		SandboxReady.WithLabelValues(egress)
	}
	for _, reason := range []string{"lost", "drift"} {
		Recreations.WithLabelValues(reason)
	}
	for _, phase := range []afev1.RunPhase{afev1.RunCompleted, afev1.RunTimedOut, afev1.RunFailed} {
		RunDuration.WithLabelValues(string(phase))
		Runs.WithLabelValues(string(phase), "false")
	}
	Runs.WithLabelValues(string(afev1.RunCompleted), "true")
}
