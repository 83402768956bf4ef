// Command genrule writes config/prometheus/prometheus_rule.yaml, the
// PrometheusRule, from config/prometheus/afe-sandbox.rules.yaml, the plain
// rules file the alerts are written in: its groups (comments included) go
// under spec: as they are. `make prometheus-rule` runs it; the test in
// config/prometheus fails when the two differ.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

const header = `# Generated from afe-sandbox.rules.yaml by hack/genrule (make prometheus-rule):
# edit that file, not this one.
#
# The afe sandbox controller's alerts as a PrometheusRule, for a Prometheus
# run by the Prometheus operator (kube-prometheus): the groups of the plain
# rules file under spec:. Runbooks: docs/operations.md. Enabled with the
# ServiceMonitor by uncommenting ../prometheus in
# config/default/kustomization.yaml.
#
# The operator loads the PrometheusRules its Prometheus' ruleSelector
# matches: kube-prometheus-stack's default asks for the label
# release: <its Helm release>; add it (with a kustomize patch) when yours
# does.
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: alerts
  namespace: system
  labels:
    app.kubernetes.io/name: afe-sandbox
spec:
`

func main() {
	in := flag.String("in", "config/prometheus/afe-sandbox.rules.yaml", "The plain rules file.")
	out := flag.String("out", "config/prometheus/prometheus_rule.yaml", "The PrometheusRule to write.")
	flag.Parse()
	if err := run(*in, *out); err != nil {
		fmt.Fprintln(os.Stderr, "genrule:", err)
		os.Exit(1)
	}
}

func run(in, out string) error {
	data, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	src := string(data)
	i := strings.Index(src, "\ngroups:\n")
	if i < 0 {
		return fmt.Errorf("%s has no top-level groups", in)
	}
	var b strings.Builder
	b.WriteString(header)
	for _, line := range strings.SplitAfter(src[i+1:], "\n") {
		if strings.TrimSpace(line) != "" {
			b.WriteString("  ")
		}
		b.WriteString(line)
	}
	return os.WriteFile(out, []byte(b.String()), 0o644)
}
