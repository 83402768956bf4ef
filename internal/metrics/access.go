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

// CountAccessRequests wraps the access API's handler so that its answers
// are counted in AccessRequests; the wrapper keeps the writer's Hijacker
// and Flusher, which the streams need.
func CountAccessRequests(h http.Handler) http.Handler {
	return promhttp.InstrumentHandlerCounter(AccessRequests, h)
}

func init() { crmetrics.Registry.MustRegister(AccessRequests) }
