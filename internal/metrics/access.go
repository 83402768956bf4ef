package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// AccessRequests counts the access API's requests (kubectl afe exec, cp,
// logs, telemetry) when each ends, by method (lower case) and status code:
// a stream (exec, logs -f) counts when it closes, as 101 when it was
// upgraded over SPDY, as 200 when over WebSocket.
var AccessRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "afe_access_requests_total",
	Help: "Requests of the access API, counted when they end, by method and HTTP status code.",
}, []string{"method", "code"})

// AccessForwards counts, in per-node mode, the access API's requests this
// manager forwarded to another node's manager (the one its sandbox is on),
// by that node; the peer serves them uncounted, so that each request
// counts once in AccessRequests.
var AccessForwards = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "afe_access_forwards_total",
	Help: "Requests of the access API forwarded to the manager of another node (per-node mode), by node.",
}, []string{"node"})

// CountAccessRequests wraps the access API's handler so that its answers
// are counted in AccessRequests; the wrapper keeps the writer's Hijacker
// and Flusher, which the streams need.
func CountAccessRequests(h http.Handler) http.Handler {
	return promhttp.InstrumentHandlerCounter(AccessRequests, h)
}

func init() { crmetrics.Registry.MustRegister(AccessRequests, AccessForwards) }
