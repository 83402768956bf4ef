package docker

import "github.com/prometheus/client_golang/prometheus"

// Requests counts the Docker API requests this package makes, by operation
// (container_inspect, volume_create, ...); the event stream counts once per
// subscription. The manager registers it with its metrics registry.
var Requests = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "afe_docker_requests_total",
	Help: "Docker API requests made by the controller, by operation.",
}, []string{"operation"})

func (c *Client) count(operation string) { Requests.WithLabelValues(operation).Inc() }
