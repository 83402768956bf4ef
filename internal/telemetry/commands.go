package telemetry

import (
	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/metrics"
)

// RecordCommand puts a command executed in a sandbox into the telemetry,
// when the manager keeps one, and counts it. Its identity is the caller's:
// derived by the controller, never read from the workload.
func RecordCommand(store *Store, rec Record, phase afev1.SandboxPhase) {
	metrics.Commands.WithLabelValues(rec.Source, string(phase), ExitClass(rec.ExitCode)).Inc()
	if store == nil {
		return
	}
	before := store.Dropped()
	store.Add(rec)
	if store.Dropped() > before {
		metrics.TelemetryDropped.Inc()
	}
}
