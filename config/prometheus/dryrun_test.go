package prometheus

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"afe.dev/sandbox/hack/controlplane"
	"afe.dev/sandbox/test/testenv"
)

// TestDefaultWithPrometheusPassesAServerSideDryRun turns config/prometheus
// on in a copy of config/ as the comment in config/default says, and
// dry-runs config/default on a local API server with a minimal
// monitoring.coreos.com (testdata/monitoring-crds.yaml: the fields used,
// with the operator's names and types), kubectl's strict field validation
// refusing any field the schema lacks.
func TestDefaultWithPrometheusPassesAServerSideDryRun(t *testing.T) {
	assets := testenv.RequireAssets(t, "kube-apiserver", "etcd")
	if _, err := exec.LookPath("kubectl"); err != nil {
		t.Fatal("kubectl is needed")
	}
	config := filepath.Join(t.TempDir(), "config")
	if out, err := exec.Command("cp", "-r", "..", config).CombinedOutput(); err != nil {
		t.Fatalf("copy config/: %v: %s", err, out)
	}
	kustomization := filepath.Join(config, "default", "kustomization.yaml")
	data, err := os.ReadFile(kustomization)
	if err != nil {
		t.Fatal(err)
	}
	on := strings.Replace(string(data), "\n  #- ../prometheus\n", "\n  - ../prometheus\n", 1)
	if on == string(data) {
		t.Fatal("config/default has no \"  #- ../prometheus\" line to uncomment")
	}
	if err := os.WriteFile(kustomization, []byte(on), 0o644); err != nil {
		t.Fatal(err)
	}

	cp, err := controlplane.Start(t.TempDir(), assets, "testdata")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	kubectl := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("kubectl", append([]string{"--kubeconfig", cp.Kubeconfig}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	kubectl("create", "namespace", "afe-system")
	out := kubectl("apply", "-k", filepath.Join(config, "default"), "--dry-run=server")
	for _, want := range []string{
		"servicemonitor.monitoring.coreos.com/afe-controller-manager-metrics-monitor created (server dry run)",
		"prometheusrule.monitoring.coreos.com/afe-alerts created (server dry run)",
		"service/afe-controller-manager-metrics created (server dry run)",
		"deployment.apps/afe-controller-manager created (server dry run)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the dry run did not say %q:\n%s", want, out)
		}
	}

	// The stand-in schema refuses what the operator's would: a field it
	// does not know.
	bad := strings.NewReplacer("honorLabels: true", "honourLabels: true", "namespace: system", "namespace: afe-system").
		Replace(readFile(t, "monitor.yaml"))
	cmd := exec.Command("kubectl", "--kubeconfig", cp.Kubeconfig, "apply", "-n", "afe-system", "--dry-run=server", "-f", "-")
	cmd.Stdin = strings.NewReader(bad)
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "honourLabels") {
		t.Errorf("a ServiceMonitor with a misspelt field passed the dry run (%v):\n%s", err, out)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
