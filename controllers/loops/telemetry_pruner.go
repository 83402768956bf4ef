package loops

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/metrics"
	"afe.dev/sandbox/internal/telemetry"
)

// TelemetryPruner applies the telemetry's retention every Period.
type TelemetryPruner struct {
	Store  *telemetry.Store
	Period time.Duration
	// Sandboxes lists the Sandboxes that exist: their sequences are kept
	// however long they were quiet.
	Sandboxes client.Reader
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
			live, err := p.live(ctx)
			if err != nil {
				// Every sequence is kept this round.
				log.Error(err, "List the Sandboxes whose sequences the telemetry keeps")
			}
			res, err := p.Store.Prune(ctx, now, live)
			if err != nil {
				log.Error(err, "Prune the telemetry")
			}
			report(log, res)
		}
	}
}

// live answers whether a Sandbox of that UID exists (nil when they cannot be
// listed).
func (p *TelemetryPruner) live(ctx context.Context) (func(string) bool, error) {
	if p.Sandboxes == nil {
		return nil, nil
	}
	var list afev1.SandboxList
	if err := p.Sandboxes.List(ctx, &list); err != nil {
		return nil, err
	}
	uids := make(map[string]bool, len(list.Items))
	for i := range list.Items {
		uids[string(list.Items[i].UID)] = true
	}
	return func(uid string) bool { return uids[uid] }, nil
}

// report logs and counts what a prune removed: what the retention removed
// in all, what the size bounds removed by namespace, kind and bound.
func report(log logr.Logger, res telemetry.PruneResult) {
	if res.Expired > 0 {
		log.Info("Pruned the telemetry", "records", res.Expired, "bound", "retention")
	}
	for _, p := range res.Bounded {
		metrics.TelemetryPruned.WithLabelValues(p.Namespace, p.Kind, p.Bound).Add(float64(p.Records))
		log.Info("Pruned the telemetry of a namespace over its share", "namespace", p.Namespace, "kind", p.Kind, "records", p.Records, "bound", p.Bound)
	}
}
