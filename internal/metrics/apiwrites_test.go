package metrics

import "testing"

func TestAPIResource(t *testing.T) {
	for path, want := range map[string]string{
		"/apis/sandbox.afe.dev/v1alpha1/namespaces/a/sandboxes/s/status":  "sandboxes/status",
		"/apis/sandbox.afe.dev/v1alpha1/namespaces/a/sandboxes/s":         "sandboxes",
		"/apis/sandbox.afe.dev/v1alpha1/namespaces/a/tickets":             "tickets",
		"/apis/events.k8s.io/v1/namespaces/a/events":                      "events",
		"/api/v1/namespaces/a/events/e":                                   "events",
		"/api/v1/namespaces/a":                                            "namespaces",
		"/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/x":    "leases",
		"/apis/sandbox.afe.dev/v1alpha1/namespaces/a/runs/r/status/extra": "runs/status",
		"/healthz": "other",
	} {
		if got := APIResource(path); got != want {
			t.Errorf("APIResource(%q) = %q, want %q", path, got, want)
		}
	}
}
