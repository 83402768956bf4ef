package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// SandboxStates serves the state of every Sandbox as the API holds it, read
// from the manager's cache at each scrape, as kube-state-metrics serves a
// Pod's: afe_sandbox_status (1 per sandbox, with its phase and the reason of
// its Ready condition) and afe_sandbox_status_recreations (its
// status.recreations). They are what the alerts on a sandbox name (one
// crash-looping, over its disk quota, waiting for an address pool) and what
// the dashboard counts by phase. Every replica, and every manager of the
// per-node mode, serves the same series: aggregate them with max, not sum.
type SandboxStates struct {
	// Reader lists the Sandboxes: the manager's cache.
	Reader client.Reader
	// Timeout bounds one listing (0 is 5s).
	Timeout time.Duration
}

var (
	sandboxStatusDesc = prometheus.NewDesc("afe_sandbox_status",
		"1 for each Sandbox, with its phase and the reason of its Ready condition (Ready when it is; AddressPoolExhausted, DiskQuotaExceeded, EngineUnavailable... when not), from the API; the same on every replica.",
		[]string{"namespace", "sandbox", "ticket", "phase", "reason"}, nil)
	sandboxRecreationsDesc = prometheus.NewDesc("afe_sandbox_status_recreations",
		"status.recreations of each Sandbox: its containers lost and recreated; the same on every replica.",
		[]string{"namespace", "sandbox", "ticket"}, nil)
	sandboxStatesErrorDesc = prometheus.NewDesc("afe_sandbox_status_list_errors",
		"1 when the last scrape could not list the Sandboxes (afe_sandbox_status is missing then), else 0.", nil, nil)
)

// Describe sends the descriptors of the series.
func (c *SandboxStates) Describe(ch chan<- *prometheus.Desc) {
	ch <- sandboxStatusDesc
	ch <- sandboxRecreationsDesc
	ch <- sandboxStatesErrorDesc
}

// Collect lists the Sandboxes and sends their series.
func (c *SandboxStates) Collect(ch chan<- prometheus.Metric) {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	list := &afev1.SandboxList{}
	if err := c.Reader.List(ctx, list); err != nil {
		ch <- prometheus.MustNewConstMetric(sandboxStatesErrorDesc, prometheus.GaugeValue, 1)
		return
	}
	ch <- prometheus.MustNewConstMetric(sandboxStatesErrorDesc, prometheus.GaugeValue, 0)
	for i := range list.Items {
		for _, m := range SandboxStateMetrics(&list.Items[i]) {
			ch <- m
		}
	}
}

// SandboxStateMetrics are the series of one Sandbox.
func SandboxStateMetrics(sbx *afev1.Sandbox) []prometheus.Metric {
	ticket := sbx.Name
	if sbx.Spec.TicketRef != nil && sbx.Spec.TicketRef.Name != "" {
		ticket = sbx.Spec.TicketRef.Name
	}
	phase := string(sbx.Status.Phase)
	if phase == "" {
		phase = string(afev1.SandboxPending)
	}
	reason := afev1.ProvisioningReason
	if c := meta.FindStatusCondition(sbx.Status.Conditions, afev1.SandboxReadyCondition); c != nil {
		reason = c.Reason
	}
	return []prometheus.Metric{
		prometheus.MustNewConstMetric(sandboxStatusDesc, prometheus.GaugeValue, 1, sbx.Namespace, sbx.Name, ticket, phase, reason),
		prometheus.MustNewConstMetric(sandboxRecreationsDesc, prometheus.GaugeValue, float64(sbx.Status.Recreations), sbx.Namespace, sbx.Name, ticket),
	}
}
