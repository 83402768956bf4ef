package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/status"
)

// UsageSample is the usage of one sandbox, as last measured.
type UsageSample struct {
	Namespace, Sandbox string
	// Ticket is the sandbox's afe.ticket label: its ticket, or its own name
	// when it has none.
	Ticket string
	Usage  afev1.Usage
}

// UsageCollector serves the latest usage measurement as per-sandbox and
// per-ticket series. Each measurement replaces the one before, so a sandbox
// that is gone has no series left.
type UsageCollector struct {
	mu      sync.Mutex
	samples []UsageSample
}

// Usage is the collector the usage collector of the controllers fills.
var Usage = &UsageCollector{}

// Set replaces the measurement.
func (c *UsageCollector) Set(samples []UsageSample) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.samples = samples
}

type usageSeries struct {
	sandbox, ticket *prometheus.Desc
	kind            prometheus.ValueType
	value           func(afev1.Usage) float64
}

var (
	sandboxLabels = []string{"namespace", "sandbox", "ticket"}
	ticketLabels  = []string{"namespace", "ticket"}
	usageDescs    = []usageSeries{
		series("cpu_seconds_total", "CPU time of the sandbox container", prometheus.CounterValue,
			func(u afev1.Usage) float64 { return float64(u.CPUMilliseconds) / 1000 }),
		series("memory_bytes", "Working set of the sandbox container", prometheus.GaugeValue,
			func(u afev1.Usage) float64 { return float64(u.MemoryBytes) }),
		series("disk_bytes", "Writable layer plus workspace volume", prometheus.GaugeValue,
			func(u afev1.Usage) float64 { return float64(u.DiskBytes) }),
		series("workspace_bytes", "Workspace volume", prometheus.GaugeValue,
			func(u afev1.Usage) float64 { return float64(u.WorkspaceBytes) }),
		series("network_receive_bytes_total", "Bytes received by the sandbox container", prometheus.CounterValue,
			func(u afev1.Usage) float64 { return float64(u.NetworkReceiveBytes) }),
		series("network_transmit_bytes_total", "Bytes sent by the sandbox container", prometheus.CounterValue,
			func(u afev1.Usage) float64 { return float64(u.NetworkTransmitBytes) }),
	}
)

func series(name, help string, kind prometheus.ValueType, value func(afev1.Usage) float64) usageSeries {
	return usageSeries{
		sandbox: prometheus.NewDesc("afe_sandbox_"+name, help+", as last measured.", sandboxLabels, nil),
		ticket:  prometheus.NewDesc("afe_ticket_"+name, help+", summed over the ticket's sandboxes.", ticketLabels, nil),
		kind:    kind,
		value:   value,
	}
}

// Describe sends the descriptors of every series.
func (c *UsageCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, s := range usageDescs {
		ch <- s.sandbox
		ch <- s.ticket
	}
}

// Collect sends the series of the latest measurement.
func (c *UsageCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	samples := c.samples
	c.mu.Unlock()
	type ticketKey struct{ namespace, ticket string }
	tickets := map[ticketKey][]afev1.Usage{}
	for _, s := range samples {
		for _, d := range usageDescs {
			ch <- prometheus.MustNewConstMetric(d.sandbox, d.kind, d.value(s.Usage), s.Namespace, s.Sandbox, s.Ticket)
		}
		k := ticketKey{s.Namespace, s.Ticket}
		tickets[k] = append(tickets[k], s.Usage)
	}
	for k, usages := range tickets {
		sum := *status.SumUsage(usages)
		for _, d := range usageDescs {
			ch <- prometheus.MustNewConstMetric(d.ticket, d.kind, d.value(sum), k.namespace, k.ticket)
		}
	}
}
