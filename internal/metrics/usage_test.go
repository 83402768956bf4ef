package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	accessv1 "afe.dev/sandbox/api/access/v1alpha1"
	"afe.dev/sandbox/internal/usage"
)

// A ticket's series are the sums of its sandboxes'; a sandbox without a
// ticket is a ticket of its own, as its afe.ticket label says.
func TestUsageSeriesSumPerTicket(t *testing.T) {
	c := &UsageCollector{}
	c.Set([]usage.Sample{
		{Namespace: "a", Name: "t1-x", Ticket: "t1", Usage: accessv1.Usage{CPUMilliseconds: 1500, WorkspaceBytes: 10}},
		{Namespace: "a", Name: "t1-y", Ticket: "t1", Usage: accessv1.Usage{CPUMilliseconds: 500, WorkspaceBytes: 20}},
		{Namespace: "a", Name: "solo", Usage: accessv1.Usage{CPUMilliseconds: 250}},
		{Namespace: "b", Name: "t1", Ticket: "t1", Usage: accessv1.Usage{CPUMilliseconds: 1000}},
	})
	want := `
# HELP afe_ticket_cpu_seconds_total CPU time of the sandbox container, summed over the ticket's sandboxes.
# TYPE afe_ticket_cpu_seconds_total counter
afe_ticket_cpu_seconds_total{namespace="a",ticket="solo"} 0.25
afe_ticket_cpu_seconds_total{namespace="a",ticket="t1"} 2
afe_ticket_cpu_seconds_total{namespace="b",ticket="t1"} 1
# HELP afe_ticket_workspace_bytes Workspace volume, summed over the ticket's sandboxes.
# TYPE afe_ticket_workspace_bytes gauge
afe_ticket_workspace_bytes{namespace="a",ticket="solo"} 0
afe_ticket_workspace_bytes{namespace="a",ticket="t1"} 30
afe_ticket_workspace_bytes{namespace="b",ticket="t1"} 0
# HELP afe_sandbox_cpu_seconds_total CPU time of the sandbox container, as last measured.
# TYPE afe_sandbox_cpu_seconds_total counter
afe_sandbox_cpu_seconds_total{namespace="a",sandbox="solo",ticket="solo"} 0.25
afe_sandbox_cpu_seconds_total{namespace="a",sandbox="t1-x",ticket="t1"} 1.5
afe_sandbox_cpu_seconds_total{namespace="a",sandbox="t1-y",ticket="t1"} 0.5
afe_sandbox_cpu_seconds_total{namespace="b",sandbox="t1",ticket="t1"} 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want),
		"afe_ticket_cpu_seconds_total", "afe_ticket_workspace_bytes", "afe_sandbox_cpu_seconds_total"); err != nil {
		t.Error(err)
	}
	c.Set(nil)
	if n := testutil.CollectAndCount(c); n != 0 {
		t.Errorf("%d series after a measurement of no sandbox, want none", n)
	}
}
