// Package metrics holds the controller's Prometheus metrics, served with
// controller-runtime's on the manager's metrics endpoint.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

var buckets = []float64{0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300}

var (
	// SandboxReady is the time from a Sandbox's creation to its first Ready.
	SandboxReady = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "afe_sandbox_ready_seconds", Help: "Time from Sandbox creation to Ready.", Buckets: buckets,
	}, []string{"egress"})
	// SandboxRecovered is the time from a loss to the sandbox being Ready
	// again.
	SandboxRecovered = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "afe_sandbox_loss_to_recreated_seconds", Help: "Time from a sandbox loss to its replacement being Ready.", Buckets: buckets,
	})
	// Recreations counts recreated sandbox containers, by reason.
	Recreations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "afe_sandbox_recreations_total", Help: "Sandbox containers recreated, by reason (lost, drift).",
	}, []string{"reason"})
	// TicketCleanup is the time from a ticket's finish to nothing being
	// left of it.
	TicketCleanup = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "afe_ticket_done_to_cleaned_seconds", Help: "Time from a ticket's terminal state to its cleanup.", Buckets: buckets,
	})
	// TicketMoves counts the tickets moved with their workspace to another
	// node (per-node mode, a drained node), by the node they left.
	TicketMoves = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "afe_ticket_moves_total", Help: "Tickets moved with their workspace to another node (per-node mode), counted by the node they left.",
	}, []string{"node"})
	// RunDuration is how long Runs executed, by phase.
	RunDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "afe_run_duration_seconds", Help: "Duration of Run executions, by outcome phase.", Buckets: buckets,
	}, []string{"phase"})
	// Runs counts ended Runs, by phase and ok.
	Runs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "afe_runs_total", Help: "Ended Runs, by phase and ok.",
	}, []string{"phase", "ok"})
	// Commands counts the commands recorded in the telemetry, by source,
	// the sandbox's phase and exit class.
	Commands = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "afe_commands_total", Help: "Commands executed in sandboxes and recorded, by source (Run, Builtin, API, Engine), sandbox phase and exit class (ok, error, signal, unknown: the command's end was not seen).",
	}, []string{"source", "phase", "exit"})
	// TelemetryDropped counts the records the telemetry store's queue had
	// no room for.
	TelemetryDropped = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "afe_telemetry_dropped_total", Help: "Command records dropped because the telemetry store's queue was full.",
	})
	// TelemetryPruned counts the records the telemetry's size bounds
	// removed, by namespace, kind (commands, egress) and bound (namespace:
	// --telemetry-namespace-max-records, store: --telemetry-max-bytes).
	TelemetryPruned = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "afe_telemetry_pruned_records_total", Help: "Telemetry records removed by the size bounds, by namespace, kind (commands, egress) and bound (namespace, store); the retention's are not counted.",
	}, []string{"namespace", "kind", "bound"})
	// EgressEmptyConnections counts the connections to egress proxies
	// that carried no request (recorded in aggregate).
	EgressEmptyConnections = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "afe_egress_empty_connections_total", Help: "Connections of sandboxes to their egress proxies that carried no request, read from the proxies' logs (recorded in aggregate, not counted in afe_egress_requests_total).",
	})
	// EgressRequests counts the egress proxies' decisions the manager read
	// and recorded, by decision (allowed, denied).
	EgressRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "afe_egress_requests_total", Help: "Requests of sandboxes through their egress proxies, read from the proxies' logs and recorded, by decision (allowed, denied).",
	}, []string{"decision"})
	// EgressLinesRefused counts the lines of proxies' logs that began as
	// a decision but did not read as one.
	EgressLinesRefused = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "afe_egress_lines_refused_total", Help: "Lines of egress proxies' logs that began as a decision line and did not read as one (not recorded).",
	})
)

// init registers the controller's metrics. The engine's request count
// (docker.Requests) is registered by the manager, which wires the engine:
// this package stays free of the Docker SDK.
func init() {
	crmetrics.Registry.MustRegister(SandboxReady, SandboxRecovered, Recreations, TicketCleanup, TicketMoves, RunDuration, Runs, Usage, Commands, TelemetryDropped, TelemetryPruned, APIWrites, EgressRequests, EgressEmptyConnections, EgressLinesRefused)
}
