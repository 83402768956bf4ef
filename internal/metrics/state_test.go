package metrics

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// listReader serves a fixed list of Sandboxes, or an error: the collector
// only lists, so this stands for the manager's cache.
type listReader struct {
	client.Reader
	items []afev1.Sandbox
	err   error
}

func (r listReader) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	if r.err != nil {
		return r.err
	}
	list.(*afev1.SandboxList).Items = r.items
	return nil
}

func sandbox(ns, name, ticket string, phase afev1.SandboxPhase, reason string, recreations int32) afev1.Sandbox {
	sbx := afev1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if ticket != "" {
		sbx.Spec.TicketRef = &afev1.TicketReference{Name: ticket}
	}
	sbx.Status.Phase, sbx.Status.Recreations = phase, recreations
	if reason != "" {
		sbx.Status.Conditions = []metav1.Condition{{Type: afev1.SandboxReadyCondition, Status: metav1.ConditionFalse, Reason: reason}}
	}
	return sbx
}

func TestSandboxStates(t *testing.T) {
	c := &SandboxStates{Reader: listReader{items: []afev1.Sandbox{
		sandbox("team-a", "t1", "t1", afev1.SandboxReady, afev1.ReadyReason, 0),
		sandbox("team-a", "t2", "t2", afev1.SandboxPending, afev1.AddressPoolExhaustedReason, 0),
		sandbox("team-b", "solo", "", afev1.SandboxRecreating, afev1.SandboxLostReason, 4),
		sandbox("team-b", "new", "", "", "", 0),
	}}}
	want := `
# HELP afe_sandbox_status 1 for each Sandbox, with its phase and the reason of its Ready condition (Ready when it is; AddressPoolExhausted, DiskQuotaExceeded, EngineUnavailable... when not), from the API; the same on every replica.
# TYPE afe_sandbox_status gauge
afe_sandbox_status{namespace="team-a",phase="Pending",reason="AddressPoolExhausted",sandbox="t2",ticket="t2"} 1
afe_sandbox_status{namespace="team-a",phase="Ready",reason="Ready",sandbox="t1",ticket="t1"} 1
afe_sandbox_status{namespace="team-b",phase="Pending",reason="Provisioning",sandbox="new",ticket="new"} 1
afe_sandbox_status{namespace="team-b",phase="Recreating",reason="SandboxLost",sandbox="solo",ticket="solo"} 1
# HELP afe_sandbox_status_list_errors 1 when the last scrape could not list the Sandboxes (afe_sandbox_status is missing then), else 0.
# TYPE afe_sandbox_status_list_errors gauge
afe_sandbox_status_list_errors 0
# HELP afe_sandbox_status_recreations status.recreations of each Sandbox: its containers lost and recreated; the same on every replica.
# TYPE afe_sandbox_status_recreations gauge
afe_sandbox_status_recreations{namespace="team-a",sandbox="t1",ticket="t1"} 0
afe_sandbox_status_recreations{namespace="team-a",sandbox="t2",ticket="t2"} 0
afe_sandbox_status_recreations{namespace="team-b",sandbox="new",ticket="new"} 0
afe_sandbox_status_recreations{namespace="team-b",sandbox="solo",ticket="solo"} 4
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Error(err)
	}

	failing := &SandboxStates{Reader: listReader{err: errors.New("cache not synced")}}
	if n := testutil.CollectAndCount(failing, "afe_sandbox_status"); n != 0 {
		t.Errorf("a failed listing served %d afe_sandbox_status series, want none", n)
	}
	wantErr := `
# HELP afe_sandbox_status_list_errors 1 when the last scrape could not list the Sandboxes (afe_sandbox_status is missing then), else 0.
# TYPE afe_sandbox_status_list_errors gauge
afe_sandbox_status_list_errors 1
`
	if err := testutil.CollectAndCompare(failing, strings.NewReader(wantErr), "afe_sandbox_status_list_errors"); err != nil {
		t.Error(err)
	}
}

func TestEngineUp(t *testing.T) {
	var answer error
	up := NewEngineUp(func(context.Context) error { return answer }, 0)
	if v := testutil.ToFloat64(up); v != 1 {
		t.Errorf("afe_docker_up = %v with the engine answering, want 1", v)
	}
	answer = errors.New("connection refused")
	if v := testutil.ToFloat64(up); v != 0 {
		t.Errorf("afe_docker_up = %v with the engine away, want 0", v)
	}
}

func TestCountAccessRequests(t *testing.T) {
	h := CountAccessRequests(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fail" {
			http.Error(w, "engine away", http.StatusServiceUnavailable)
		}
	}))
	before := testutil.ToFloat64(AccessRequests.WithLabelValues("post", "503"))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/fail", nil))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/ok", nil))
	if got := testutil.ToFloat64(AccessRequests.WithLabelValues("post", "503")) - before; got != 1 {
		t.Errorf("afe_access_requests_total{method=post,code=503} grew by %v, want 1", got)
	}
	if got := testutil.ToFloat64(AccessRequests.WithLabelValues("get", "200")); got < 1 {
		t.Errorf("afe_access_requests_total{method=get,code=200} = %v, want at least 1", got)
	}
}

// The series rate() must see from 0 exist before anything happened.
func TestSeriesServedFromZero(t *testing.T) {
	for name, c := range map[string]struct {
		collector prometheus.Collector
		want      int
	}{
		"afe_sandbox_ready_seconds":     {SandboxReady, 2},
		"afe_sandbox_recreations_total": {Recreations, 2},
		"afe_run_duration_seconds":      {RunDuration, 3},
		"afe_runs_total":                {Runs, 4},
	} {
		if n := testutil.CollectAndCount(c.collector); n < c.want {
			t.Errorf("%s: %d series served at start, want %d", name, n, c.want)
		}
	}
}
