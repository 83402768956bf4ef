package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// NewEngineUp is afe_docker_up: at each scrape the manager pings its Docker
// engine (within timeout, 0 being 3s, as the readiness check does) and
// serves 1 when it answered, 0 when not.
func NewEngineUp(ping func(context.Context) error, timeout time.Duration) prometheus.Collector {
	if timeout <= 0 {
		timeout = 3 * time.Second
	}
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "afe_docker_up",
		Help: "1 when the Docker engine answered the manager's ping at this scrape, else 0.",
	}, func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if ping(ctx) != nil {
			return 0
		}
		return 1
	})
}
