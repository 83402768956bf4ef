package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/sandboxspec"
	"afe.dev/sandbox/test/dockertest"
)

func TestQuantiles(t *testing.T) {
	ms := func(v ...int) sample {
		s := sample{}
		for _, x := range v {
			s = append(s, time.Duration(x)*time.Millisecond)
		}
		return s
	}
	tests := []struct {
		in          sample
		median, p95 time.Duration
	}{
		{ms(5), 5 * time.Millisecond, 5 * time.Millisecond},
		{ms(3, 1, 2), 2 * time.Millisecond, 3 * time.Millisecond},
		{ms(1, 2, 3, 4), 2 * time.Millisecond, 4 * time.Millisecond},
		{ms(10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20), 10 * time.Millisecond, 19 * time.Millisecond},
		{nil, 0, 0},
	}
	for _, tt := range tests {
		if got := tt.in.median(); got != tt.median {
			t.Errorf("median(%v) = %v, want %v", tt.in, got, tt.median)
		}
		if got := tt.in.p95(); got != tt.p95 {
			t.Errorf("p95(%v) = %v, want %v", tt.in, got, tt.p95)
		}
	}
}

func TestTable(t *testing.T) {
	r := timing("x", sample{200 * time.Millisecond, 400 * time.Millisecond}, sample{100 * time.Millisecond}, "sequential")
	want := row{Scenario: "x", Controller: "200 ms (p95 400 ms)", Baseline: "sequential 100 ms", Ratio: "2.00x"}
	if r != want {
		t.Errorf("timing = %+v, want %+v", r, want)
	}
	var out strings.Builder
	writeTable(&out, []row{want})
	if !strings.Contains(out.String(), "| x | 200 ms (p95 400 ms) | sequential 100 ms | 2.00x |") {
		t.Errorf("table:\n%s", out.String())
	}
}

// requireEngine returns the local engine, skipping (failing under CI)
// without one.
func requireEngine(t *testing.T) *docker.Client {
	t.Helper()
	engine, skip, err := dockertest.Require()
	if err != nil {
		t.Fatal(err)
	}
	if skip != "" {
		t.Skip(skip)
	}
	t.Cleanup(func() { _ = engine.Close() })
	return engine
}

// The baseline must make the very container the controller makes: the CLI
// flags rendered from a spec give what the docker package gives the engine.
func TestCLIBaselineMakesTheControllersContainer(t *testing.T) {
	engine := requireEngine(t)
	ctx := context.Background()
	instance := "bench-twin-" + strconv.Itoa(os.Getpid())
	t.Cleanup(func() { dockertest.RemoveAll(afev1.LabelController + "=" + instance) })

	sbx := &afev1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: "twin", UID: types.UID("uid-twin")}}
	sbx.Spec.Image = dockertest.TestImage
	sbx.Spec.User = "1000:1000"
	sbx.Spec.Resources.Pids = 64
	sbx.Spec.Env = []afev1.EnvVar{{Name: "GREETING", Value: "hello world"}}
	viaSDK := newCLISandbox(sbx, instance, sandboxspec.ProxyOptions{})
	sbx.Name, sbx.UID = "twin-cli", "uid-twin-cli"
	viaCLI := newCLISandbox(sbx, instance, sandboxspec.ProxyOptions{})

	if _, err := engine.EnsureVolume(ctx, viaSDK.volume); err != nil {
		t.Fatal(err)
	}
	if _, err := engine.RunContainer(ctx, viaSDK.sandbox); err != nil {
		t.Fatal(err)
	}
	if err := viaCLI.create(ctx); err != nil {
		t.Fatal(err)
	}
	sdk, cli := inspectRaw(t, viaSDK.sandbox.Name), inspectRaw(t, viaCLI.sandbox.Name)
	for _, field := range []string{
		"HostConfig.CapDrop", "HostConfig.CapAdd", "HostConfig.SecurityOpt", "HostConfig.Memory", "HostConfig.MemorySwap",
		"HostConfig.NanoCpus", "HostConfig.PidsLimit", "HostConfig.Ulimits", "HostConfig.Init", "HostConfig.NetworkMode",
		"HostConfig.Dns", "HostConfig.IpcMode", "HostConfig.ReadonlyRootfs", "HostConfig.Tmpfs", "HostConfig.Privileged",
		"HostConfig.RestartPolicy", "Config.User", "Config.Env", "Config.Cmd", "Config.Entrypoint", "Config.WorkingDir",
		"Config.OpenStdin",
	} {
		if a, b := pick(sdk, field), pick(cli, field); !reflect.DeepEqual(a, b) {
			t.Errorf("%s: controller %v, CLI baseline %v", field, a, b)
		}
	}
	owner := func(name string) string {
		out, err := exec.Command("docker", "exec", name, "stat", "-c", "%u:%g", "/workspace").CombinedOutput()
		if err != nil {
			t.Fatalf("stat: %v: %s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if a, b := owner(viaSDK.sandbox.Name), owner(viaCLI.sandbox.Name); a != "1000:1000" || b != a {
		t.Errorf("/workspace owner: controller %s, CLI baseline %s", a, b)
	}
}

func inspectRaw(t *testing.T, name string) map[string]any {
	t.Helper()
	out, err := exec.Command("docker", "inspect", name).Output()
	if err != nil {
		t.Fatalf("inspect %s: %v", name, err)
	}
	var v []map[string]any
	if err := json.Unmarshal(out, &v); err != nil || len(v) != 1 {
		t.Fatalf("inspect %s: %v", name, err)
	}
	return v[0]
}

// pick returns the value at path; an empty list is nil (the engine reports
// an unset list either way).
func pick(v map[string]any, path string) any {
	var cur any = v
	for _, k := range strings.Split(path, ".") {
		m, _ := cur.(map[string]any)
		cur = m[k]
	}
	if l, ok := cur.([]any); ok && len(l) == 0 {
		return nil
	}
	return cur
}

// A short run of the whole harness: every scenario, tiny sizes.
func TestBenchSmoke(t *testing.T) {
	requireEngine(t)
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = filepath.Join(root, "bin", "envtest", "1.37.2")
	}
	if _, err := os.Stat(filepath.Join(assets, "kube-apiserver")); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI is set and the envtest binaries are missing: %v", err)
		}
		t.Skipf("no envtest binaries (run `make envtest`): %v", err)
	}
	manager := os.Getenv("AFE_MANAGER_BIN")
	if manager == "" {
		manager = filepath.Join(t.TempDir(), "manager")
		if out, err := exec.Command("go", "build", "-o", manager, "afe.dev/sandbox/cmd/manager").CombinedOutput(); err != nil {
			t.Fatalf("build the manager: %v: %s", err, out)
		}
	}
	plugin := os.Getenv("AFE_KUBECTL_AFE_BIN")
	if plugin == "" {
		plugin = filepath.Join(t.TempDir(), "kubectl-afe")
		if out, err := exec.Command("go", "build", "-o", plugin, "afe.dev/sandbox/cmd/kubectl-afe").CombinedOutput(); err != nil {
			t.Fatalf("build the plugin: %v: %s", err, out)
		}
	}
	cfg := config{
		Assets: assets, Manager: manager, Plugin: plugin, CRDs: filepath.Join(root, "config", "crd", "bases"),
		Image: dockertest.TestImage, ProxyImage: "afe/egress-proxy:dev", Out: t.TempDir(),
		Reps: 2, EgressReps: 1, Tickets: 3, LossReps: 2, RunReps: 2, Idle: 3, IdleFor: 3 * time.Second,
		// A resync of 1s would show in the idle seconds if a Ready sandbox
		// were looked at on its own (the sweep runs every 10 s at most).
		Resync:   time.Second,
		Parallel: 2, Concurrency: 4,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	var log strings.Builder
	rows, err := run(ctx, cfg, &log)
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, log.String())
	}
	var table strings.Builder
	writeTable(&table, rows)
	t.Logf("\n%s", table.String())
	if len(rows) != 9 {
		t.Fatalf("want 9 rows, got %d", len(rows))
	}
	for _, r := range rows[:7] {
		if r.Controller == "" || r.Baseline == "" || !strings.HasSuffix(r.Ratio, "x") {
			t.Errorf("row without figures: %+v", r)
		}
	}
	if !strings.Contains(rows[8].Controller, "Docker requests") {
		t.Errorf("idle row: %+v", rows[8])
	}
	// Idle, only the sweep's lists: nothing per sandbox.
	_, ops, _ := strings.Cut(rows[8].Controller, "(")
	ops, _, _ = strings.Cut(ops, ")")
	for _, op := range strings.Split(ops, ", ") {
		if name, _, _ := strings.Cut(op, " "); name != "none" && !strings.HasSuffix(name, "_list") {
			t.Errorf("idle sandboxes cost %s requests: %s", name, rows[8].Controller)
		}
	}
	pid := os.Getpid()
	for _, inst := range []string{"bench-", "bench-cli-"} {
		left, err := dockertest.Objects(afev1.LabelController + "=" + inst + strconv.Itoa(pid))
		if err != nil {
			t.Errorf("list what is left: %v", err)
		}
		if len(left) > 0 {
			t.Errorf("left behind: %v", left)
		}
	}
}
