// Package prometheus holds the manager's monitoring for Prometheus: the
// alerts as a plain rules file and as a PrometheusRule, the ServiceMonitor,
// and promtool's tests of the alerts (tests/, run by `make test-rules`).
// This test checks what promtool does not: that the two forms hold the same
// rules, that every alert says what an operator needs and has its runbook,
// that promtool's tests cover every alert both firing and silent, and that
// the ServiceMonitor selects the metrics Service.
package prometheus

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

type rule struct {
	Alert       string            `json:"alert,omitempty"`
	Record      string            `json:"record,omitempty"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type group struct {
	Name  string `json:"name"`
	Rules []rule `json:"rules"`
}

func read(t *testing.T, path string, into any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func plainGroups(t *testing.T) []group {
	var file struct {
		Groups []group `json:"groups"`
	}
	read(t, "afe-sandbox.rules.yaml", &file)
	return file.Groups
}

func alerts(t *testing.T) []rule {
	var out []rule
	for _, g := range plainGroups(t) {
		for _, r := range g.Rules {
			if r.Alert != "" {
				out = append(out, r)
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("no alert in afe-sandbox.rules.yaml")
	}
	return out
}

func TestPrometheusRuleHoldsThePlainRules(t *testing.T) {
	var pr struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name      string            `json:"name"`
			Namespace string            `json:"namespace"`
			Labels    map[string]string `json:"labels"`
		} `json:"metadata"`
		Spec struct {
			Groups []group `json:"groups"`
		} `json:"spec"`
	}
	read(t, "prometheus_rule.yaml", &pr)
	if pr.APIVersion != "monitoring.coreos.com/v1" || pr.Kind != "PrometheusRule" {
		t.Errorf("prometheus_rule.yaml is a %s %s, want a monitoring.coreos.com/v1 PrometheusRule", pr.APIVersion, pr.Kind)
	}
	if diff := cmp.Diff(plainGroups(t), pr.Spec.Groups); diff != "" {
		t.Errorf("prometheus_rule.yaml's spec.groups differ from afe-sandbox.rules.yaml's groups (-plain +PrometheusRule): copy them over\n%s", diff)
	}
}

// heading is a Markdown heading, whose GitHub anchor is its text in lower
// case with spaces as dashes and other punctuation dropped.
var heading = regexp.MustCompile(`(?m)^#{1,6} +(.+?) *$`)

func anchors(t *testing.T, path string) map[string]bool {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, m := range heading.FindAllStringSubmatch(string(data), -1) {
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
				b.WriteRune(r)
			}
		}
		out[b.String()] = true
	}
	return out
}

func TestEveryAlertSaysWhatToDo(t *testing.T) {
	runbooks := anchors(t, filepath.Join("..", "..", "docs", "operations.md"))
	seen := map[string]bool{}
	for _, a := range alerts(t) {
		if seen[a.Alert] {
			t.Errorf("alert %s is defined twice", a.Alert)
		}
		seen[a.Alert] = true
		if !strings.HasPrefix(a.Alert, "Afe") {
			t.Errorf("alert %s: names start with Afe, so that they group apart from other components' alerts", a.Alert)
		}
		switch a.Labels["severity"] {
		case "critical", "warning", "info":
		default:
			t.Errorf("alert %s: severity %q, want critical, warning or info", a.Alert, a.Labels["severity"])
		}
		if a.Annotations["summary"] == "" || len(a.Annotations["description"]) < 80 {
			t.Errorf("alert %s: a summary and a description that says what happened and what to do are needed", a.Alert)
		}
		anchor := strings.ToLower(a.Alert)
		if want := "docs/operations.md#" + anchor; a.Annotations["runbook_url"] != want {
			t.Errorf("alert %s: runbook_url %q, want %q", a.Alert, a.Annotations["runbook_url"], want)
		}
		if !runbooks[anchor] {
			t.Errorf("alert %s: docs/operations.md has no section %q", a.Alert, "### "+a.Alert)
		}
	}
}

// TestEveryAlertIsTestedBothWays reads promtool's tests: each alert needs an
// evaluation where it fires and one where it must not.
func TestEveryAlertIsTestedBothWays(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("tests", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no promtool tests in tests/: %v", err)
	}
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, f := range files {
		var file struct {
			RuleFiles          []string `json:"rule_files"`
			EvaluationInterval string   `json:"evaluation_interval"`
			Tests              []struct {
				Name          string `json:"name"`
				Interval      string `json:"interval"`
				InputSeries   []any  `json:"input_series"`
				AlertRuleTest []struct {
					EvalTime  string `json:"eval_time"`
					Alertname string `json:"alertname"`
					ExpAlerts []any  `json:"exp_alerts"`
				} `json:"alert_rule_test"`
				PromQLExprTest []any `json:"promql_expr_test"`
			} `json:"tests"`
		}
		read(t, f, &file)
		if !cmp.Equal(file.RuleFiles, []string{"../afe-sandbox.rules.yaml"}) {
			t.Errorf("%s: rule_files %v, want the plain rules file", f, file.RuleFiles)
		}
		for _, tc := range file.Tests {
			for _, at := range tc.AlertRuleTest {
				if len(at.ExpAlerts) > 0 {
					fires[at.Alertname] = true
				} else {
					silent[at.Alertname] = true
				}
			}
		}
	}
	var missing []string
	for _, a := range alerts(t) {
		if !fires[a.Alert] {
			missing = append(missing, a.Alert+" firing")
		}
		if !silent[a.Alert] {
			missing = append(missing, a.Alert+" silent")
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("promtool's tests lack these cases: %s", strings.Join(missing, ", "))
	}
}

func TestServiceMonitorSelectsTheMetricsService(t *testing.T) {
	var monitor struct {
		Kind string `json:"kind"`
		Spec struct {
			Endpoints []struct {
				Port        string `json:"port"`
				Path        string `json:"path"`
				Scheme      string `json:"scheme"`
				Interval    string `json:"interval"`
				HonorLabels bool   `json:"honorLabels"`
			} `json:"endpoints"`
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
		} `json:"spec"`
		Metadata   map[string]any `json:"metadata"`
		APIVersion string         `json:"apiVersion"`
	}
	read(t, "monitor.yaml", &monitor)
	var svc, access struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
		Spec struct {
			Ports []struct {
				Name string `json:"name"`
			} `json:"ports"`
		} `json:"spec"`
	}
	data, err := os.ReadFile(filepath.Join("..", "default", "metrics_service.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &svc); err != nil {
		t.Fatal(err)
	}
	data, err = os.ReadFile(filepath.Join("..", "manager", "access_service.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &access); err != nil {
		t.Fatal(err)
	}
	selects := func(labels map[string]string) bool {
		for k, v := range monitor.Spec.Selector.MatchLabels {
			if labels[k] != v {
				return false
			}
		}
		return len(monitor.Spec.Selector.MatchLabels) > 0
	}
	if !selects(svc.Metadata.Labels) || selects(access.Metadata.Labels) {
		t.Errorf("the ServiceMonitor's selector %v must match the metrics Service (labels %v) and not the access Service (labels %v)",
			monitor.Spec.Selector.MatchLabels, svc.Metadata.Labels, access.Metadata.Labels)
	}
	if len(monitor.Spec.Endpoints) != 1 {
		t.Fatalf("the ServiceMonitor has %d endpoints, want 1", len(monitor.Spec.Endpoints))
	}
	ep := monitor.Spec.Endpoints[0]
	if len(svc.Spec.Ports) != 1 || ep.Port != svc.Spec.Ports[0].Name || ep.Path != "/metrics" || ep.Scheme != "http" {
		t.Errorf("the ServiceMonitor scrapes %s://:%s%s, want http on the metrics Service's port %v at /metrics", ep.Scheme, ep.Port, ep.Path, svc.Spec.Ports)
	}
	if !ep.HonorLabels {
		t.Error("the ServiceMonitor must honor the scraped labels: the afe_sandbox_* series' namespace is the Sandbox's")
	}
}

func TestDefaultLeavesPrometheusOff(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "default", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	if !strings.Contains(s, "\n  #- ../prometheus\n") || strings.Contains(s, "\n  - ../prometheus\n") {
		t.Error("config/default must list ../prometheus commented out (\"  #- ../prometheus\"), as kubebuilder does: clusters without the Prometheus operator's CRDs refuse it")
	}
	var k struct {
		Resources []string `json:"resources"`
	}
	data, err = os.ReadFile("kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &k); err != nil {
		t.Fatal(err)
	}
	if !cmp.Equal(k.Resources, []string{"monitor.yaml", "prometheus_rule.yaml"}) {
		t.Errorf("config/prometheus/kustomization.yaml lists %v, want the ServiceMonitor and the PrometheusRule", k.Resources)
	}
}
