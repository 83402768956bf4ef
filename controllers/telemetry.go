package controllers

import (
	"context"
	"time"

	logf "sigs.k8s.io/controller-runtime/pkg/log"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/metrics"
	"afe.dev/sandbox/internal/telemetry"
)

// recordCommand puts a command executed in a sandbox into the telemetry,
// when the manager keeps one, and counts it. Its identity is the caller's:
// derived by the controller, never read from the workload.
func recordCommand(store *telemetry.Store, rec telemetry.Record, phase afev1.SandboxPhase) {
	metrics.Commands.WithLabelValues(rec.Source, string(phase), exitClass(rec.ExitCode)).Inc()
	if store == nil {
		return
	}
	before := store.Dropped()
	store.Add(rec)
	if store.Dropped() > before {
		metrics.TelemetryDropped.Inc()
	}
}

// exitClass words an exit code for the metrics: ok, error (1-127), signal
// (128 and up: killed).
func exitClass(code int) string {
	switch {
	case code == 0:
		return "ok"
	case code > 0 && code < 128:
		return "error"
	}
	return "signal"
}

// TelemetryPruner applies the telemetry's retention every Period.
type TelemetryPruner struct {
	Store  *telemetry.Store
	Period time.Duration
}

// Start prunes until ctx ends, then commits what is queued and closes the
// store.
func (p *TelemetryPruner) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("telemetry")
	t := time.NewTicker(p.Period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return p.Store.Close()
		case now := <-t.C:
			if n, err := p.Store.Prune(ctx, now); err != nil {
				log.Error(err, "Prune the telemetry")
			} else if n > 0 {
				log.Info("Pruned the telemetry", "records", n)
			}
		}
	}
}
