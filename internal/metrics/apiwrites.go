package metrics

import (
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// APIWrites counts the manager's writes to the Kubernetes API, by verb and
// resource ("PATCH", "sandboxes/status"): the cost a change makes, as the
// bench reports it per Ticket and per Run.
var APIWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "afe_api_writes_total", Help: "Writes of the manager to the Kubernetes API, by verb and resource (subresource after a slash).",
}, []string{"verb", "resource"})

// CountAPIWrites wraps a client's transport so that its writes are counted
// in APIWrites; reads pass uncounted.
func CountAPIWrites(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			APIWrites.WithLabelValues(req.Method, APIResource(req.URL.Path)).Inc()
		}
		return rt.RoundTrip(req)
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// APIResource is the resource of an API path, with its subresource:
// /apis/G/V/namespaces/NS/sandboxes/NAME/status is "sandboxes/status",
// /api/v1/namespaces/NS/events is "events".
func APIResource(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return "other"
	}
	if len(parts) >= 2 && parts[0] == "namespaces" {
		if len(parts) == 2 {
			return "namespaces"
		}
		parts = parts[2:]
	}
	switch len(parts) {
	case 0:
		return "other"
	case 1, 2:
		return parts[0]
	default:
		return parts[0] + "/" + parts[2]
	}
}
