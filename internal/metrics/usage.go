package metrics

import (
	"cmp"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	accessv1 "afe.dev/sandbox/api/access/v1alpha1"
	"afe.dev/sandbox/internal/usage"
)

// UsageCollector serves the latest usage measurement as per-sandbox and
// per-ticket series. Each measurement replaces the one before, so a sandbox
// that is gone has no series left. A sandbox's ticket label is its
// afe.ticket label's value: its ticket, or its own name when it has none.
type UsageCollector struct {
	mu      sync.Mutex
	samples []usage.Sample
}

// Usage is the collector the usage collector of the controllers fills.
var Usage = &UsageCollector{}

// Set replaces the measurement.
func (c *UsageCollector) Set(samples []usage.Sample) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.samples = samples
}

type usageSeries struct {
	sandbox, ticket *prometheus.Desc
	kind            prometheus.ValueType
	value           func(accessv1.Usage) float64
}

var (
	sandboxLabels = []string{"namespace", "sandbox", "ticket"}
	ticketLabels  = []string{"namespace", "ticket"}
	usageDescs    = []usageSeries{
		series("cpu_seconds_total", "CPU time of the sandbox container", prometheus.CounterValue,
			func(u accessv1.Usage) float64 { return float64(u.CPUMilliseconds) / 1000 }),
		series("memory_bytes", "Working set of the sandbox container", prometheus.GaugeValue,
			func(u accessv1.Usage) float64 { return float64(u.MemoryBytes) }),
		series("disk_bytes", "Writable layer plus workspace volume", prometheus.GaugeValue,
			func(u accessv1.Usage) float64 { return float64(u.DiskBytes) }),
		series("workspace_bytes", "Workspace volume", prometheus.GaugeValue,
			func(u accessv1.Usage) float64 { return float64(u.WorkspaceBytes) }),
		series("network_receive_bytes_total", "Bytes received by the sandbox container", prometheus.CounterValue,
			func(u accessv1.Usage) float64 { return float64(u.NetworkReceiveBytes) }),
		series("network_transmit_bytes_total", "Bytes sent by the sandbox container", prometheus.CounterValue,
			func(u accessv1.Usage) float64 { return float64(u.NetworkTransmitBytes) }),
	}
)

func series(name, help string, kind prometheus.ValueType, value func(accessv1.Usage) float64) usageSeries {
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
	tickets := map[ticketKey]accessv1.Usage{}
	for _, s := range samples {
		ticket := cmp.Or(s.Ticket, s.Name)
		for _, d := range usageDescs {
			ch <- prometheus.MustNewConstMetric(d.sandbox, d.kind, d.value(s.Usage), s.Namespace, s.Name, ticket)
		}
		k := ticketKey{s.Namespace, ticket}
		tickets[k] = sum(tickets[k], s.Usage)
	}
	for k, total := range tickets {
		for _, d := range usageDescs {
			ch <- prometheus.MustNewConstMetric(d.ticket, d.kind, d.value(total), k.namespace, k.ticket)
		}
	}
}

// sum adds up two sandboxes' figures.
func sum(a, b accessv1.Usage) accessv1.Usage {
	return accessv1.Usage{
		CPUMilliseconds:      a.CPUMilliseconds + b.CPUMilliseconds,
		MemoryBytes:          a.MemoryBytes + b.MemoryBytes,
		DiskBytes:            a.DiskBytes + b.DiskBytes,
		WritableLayerBytes:   a.WritableLayerBytes + b.WritableLayerBytes,
		WorkspaceBytes:       a.WorkspaceBytes + b.WorkspaceBytes,
		NetworkReceiveBytes:  a.NetworkReceiveBytes + b.NetworkReceiveBytes,
		NetworkTransmitBytes: a.NetworkTransmitBytes + b.NetworkTransmitBytes,
		EgressBytes:          a.EgressBytes + b.EgressBytes,
		EgressDenials:        a.EgressDenials + b.EgressDenials,
	}
}
