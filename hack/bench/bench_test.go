package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/sandboxspec"
	"afe.dev/sandbox/test/dockertest"
	"afe.dev/sandbox/test/testenv"
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

func TestPerTicket(t *testing.T) {
	before := map[string]float64{"api:PATCH sandboxes/status": 4, "usage:sandboxes/status": 4, "docker:container_create": 0}
	for _, tc := range []struct {
		name  string
		after map[string]float64
		want  string
	}{
		{"no usage report in the window", map[string]float64{"api:PATCH sandboxes/status": 6, "api:POST sandboxes": 2, "usage:sandboxes/status": 4, "docker:container_create": 2},
			"Docker 1.0 (container_create 1.0), API writes 2.0 (PATCH sandboxes/status 1.0, POST sandboxes 1.0)"},
		{"usage reports said apart", map[string]float64{"api:PATCH sandboxes/status": 8, "api:POST sandboxes": 2, "usage:sandboxes/status": 6, "docker:container_create": 2},
			"Docker 1.0 (container_create 1.0), API writes 2.0 (PATCH sandboxes/status 1.0, POST sandboxes 1.0) and 1.0 usage reports"},
		{"an older manager, by method", map[string]float64{"rest:PATCH": 2, "docker:container_create": 2},
			"Docker 1.0 (container_create 1.0), API writes 1.0 (PATCH 1.0)"},
	} {
		if got := perTicket(before, tc.after, 2); got != tc.want {
			t.Errorf("%s: perTicket = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestParseStat(t *testing.T) {
	// A command name with a space and a parenthesis, as a workload may
	// name its process.
	line := "4242 (squid (x) y) S 1 4242 4242 0 -1 4194560 900 0 0 0 150 75 0 0 20 0 1 0 98765 12345678 2048 18446744073709551615"
	got := parseStat(line)
	want := procStat{comm: "squid (x) y", ticks: 225, started: 98765}
	if got != want {
		t.Fatalf("parseStat = %+v, want %+v", got, want)
	}
	if got := parseStat("4242 (short) S 1 2 3"); got != (procStat{}) {
		t.Fatalf("a short line gave %+v, want nothing", got)
	}
}

func TestCPUBetween(t *testing.T) {
	k := func(pid, started int64) procKey { return procKey{pid, started} }
	tests := []struct {
		name          string
		before, after cpuSample
		want          time.Duration
	}{
		{"growth of each process", cpuSample{k(1, 10): 100, k(2, 10): 50}, cpuSample{k(1, 10): 130, k(2, 10): 60}, 400 * time.Millisecond},
		{"a process that ended is left out, not subtracted", cpuSample{k(1, 10): 100, k(2, 10): 5000}, cpuSample{k(1, 10): 110}, 100 * time.Millisecond},
		{"a process that started is counted whole", cpuSample{k(1, 10): 100}, cpuSample{k(1, 10): 100, k(3, 20): 7}, 70 * time.Millisecond},
		{"a reused PID is another process", cpuSample{k(1, 10): 500}, cpuSample{k(1, 99): 20}, 200 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := cpuBetween(tt.before, tt.after); got != tt.want {
				t.Fatalf("cpuBetween = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestTable(t *testing.T) {
	r := timing("x", sample{400 * time.Millisecond, 200 * time.Millisecond}, sample{100 * time.Millisecond}, "sequential")
	want := row{Scenario: "x", Controller: "200 ms (p95 400 ms)", Baseline: "sequential 100 ms", Ratio: "2.00x",
		Samples: &timingSamples{Unit: "s", ControllerName: "controller", BaselineName: "sequential",
			Controller: []float64{0.4, 0.2}, Baseline: []float64{0.1}}}
	if diff := cmp.Diff(want, r); diff != "" {
		t.Errorf("timing (-want +got):\n%s", diff)
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

// The twin of a sandbox with egress: its internal network, its proxy and
// the sandbox container on that network, as the controller makes them.
func TestCLIBaselineMakesTheControllersEgress(t *testing.T) {
	engine := requireEngine(t)
	if skip, err := dockertest.RequireImage("afe/egress-proxy:dev"); err != nil || skip != "" {
		t.Fatalf("the proxy image: %v %s", err, skip)
	}
	ctx := context.Background()
	instance := "bench-twin-egress-" + strconv.Itoa(os.Getpid())
	label := afev1.LabelController + "=" + instance
	t.Cleanup(func() { dockertest.RemoveAll(label) })
	// The proxies' way out is a network of the test's own.
	egress := "afe-" + instance + "-out"
	if out, err := exec.Command("docker", "network", "create", "--label", label, egress).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	proxy := sandboxspec.ProxyOptions{Image: "afe/egress-proxy:dev", EgressNetwork: egress}

	sbx := &afev1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: "twin", UID: types.UID("uid-twin-egress")}}
	sbx.Spec.Image = dockertest.TestImage
	sbx.Spec.User = "1000:1000"
	sbx.Spec.Resources.Pids = 64
	sbx.Spec.Egress = []afev1.EgressHost{"allowed.test"}
	viaSDK := newCLISandbox(sbx, instance, proxy)
	sbx.Name, sbx.UID = "twin-cli", "uid-twin-egress-cli"
	viaCLI := newCLISandbox(sbx, instance, proxy)

	if _, err := engine.EnsureVolume(ctx, viaSDK.volume); err != nil {
		t.Fatal(err)
	}
	if _, err := engine.EnsureNetwork(ctx, *viaSDK.network); err != nil {
		t.Fatal(err)
	}
	if _, err := engine.RunContainer(ctx, *viaSDK.proxy); err != nil {
		t.Fatal(err)
	}
	if _, err := engine.RunContainer(ctx, viaSDK.sandbox); err != nil {
		t.Fatal(err)
	}
	if err := viaCLI.create(ctx); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"Internal", "Driver", "Options", "EnableIPv6"} {
		if a, b := pick(inspectRaw(t, viaSDK.network.Name), f), pick(inspectRaw(t, viaCLI.network.Name), f); !reflect.DeepEqual(a, b) {
			t.Errorf("network %s: controller %v, CLI baseline %v", f, a, b)
		}
	}
	containerFields := []string{
		"HostConfig.CapDrop", "HostConfig.CapAdd", "HostConfig.SecurityOpt", "HostConfig.Memory", "HostConfig.MemorySwap",
		"HostConfig.NanoCpus", "HostConfig.PidsLimit", "HostConfig.Ulimits", "HostConfig.Init", "HostConfig.Dns",
		"HostConfig.IpcMode", "HostConfig.ReadonlyRootfs", "HostConfig.Tmpfs", "HostConfig.Privileged",
		"HostConfig.RestartPolicy", "Config.User", "Config.Env", "Config.Cmd", "Config.Entrypoint", "Config.WorkingDir",
	}
	for _, pair := range [][2]string{{viaSDK.proxy.Name, viaCLI.proxy.Name}, {viaSDK.sandbox.Name, viaCLI.sandbox.Name}} {
		sdk, cli := inspectRaw(t, pair[0]), inspectRaw(t, pair[1])
		for _, f := range containerFields {
			a, b := pick(sdk, f), pick(cli, f)
			if f == "Config.Env" {
				// The same variables; their order is not the point.
				a, b = sortedStrings(a), sortedStrings(b)
			}
			if !reflect.DeepEqual(a, b) {
				t.Errorf("%s %s: controller %v, CLI baseline %v", pair[0], f, a, b)
			}
		}
		// The same networks, by role: the sandbox's internal one (and, for
		// the proxy, the way out).
		nets := func(c map[string]any, own string) []string {
			var out []string
			for n := range pick(c, "NetworkSettings.Networks").(map[string]any) {
				out = append(out, strings.Replace(n, own, "<internal>", 1))
			}
			sort.Strings(out)
			return out
		}
		if a, b := nets(sdk, viaSDK.network.Name), nets(cli, viaCLI.network.Name); !reflect.DeepEqual(a, b) {
			t.Errorf("%s networks: controller %v, CLI baseline %v", pair[0], a, b)
		}
	}
}

// sortedStrings sorts a list of strings from an inspect answer.
func sortedStrings(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		out = append(out, fmt.Sprint(x))
	}
	sort.Strings(out)
	return out
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
	assets := testenv.RequireAssets(t, "kube-apiserver")
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
		Reps: 2, EgressReps: 1, Tickets: 3, LossReps: 2, RunReps: 2, ResumeReps: 1, Idle: 3, IdleFor: 3 * time.Second,
		EgressScale: 3, UserTickets: []int{2}, Kubectl: true, PlacementTickets: 3, PoolTickets: 3,
		RuntimeReps: 1, RuntimeFiles: 100, RuntimeIdle: 1,
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
		t.Fatalf("bench: %v\n%s\nthe manager's log, its errors and its last lines:\n%s",
			err, log.String(), managerErrors(filepath.Join(cfg.Out, "manager.log"), 40))
	}
	var table strings.Builder
	writeTable(&table, rows)
	t.Logf("\n%s", table.String())
	// Every scenario has its rows; each timing row its figures.
	var idle *row
	var egressScale, memory, requests, placement, forward, runtimes []row
	for i, r := range rows {
		if strings.HasPrefix(r.Scenario, "runsc against runc: ") {
			runtimes = append(runtimes, r)
			if r.Scenario == "runsc against runc: the runtimes compared" {
				if !strings.HasPrefix(r.Controller, "runsc version ") || !strings.Contains(r.Controller, ", platform ") ||
					!strings.HasPrefix(r.Baseline, "runc version ") {
					t.Errorf("the runtimes row names no versions or platform: %+v", r)
				}
				continue
			}
			if !strings.HasPrefix(r.Controller, "runsc ") && !regexp.MustCompile(`^\d`).MatchString(r.Controller) ||
				!strings.HasPrefix(r.Baseline, "runc ") || !strings.HasSuffix(r.Ratio, "x") {
				t.Errorf("runtime row without figures: %+v", r)
			}
			continue
		}
		switch {
		case strings.Contains(r.Scenario, "Ready sandboxes idle for"):
			idle = &rows[i]
		case strings.Contains(r.Scenario, "Sandboxes with egress") && strings.Contains(r.Scenario, "at once, until all Ready"),
			strings.Contains(r.Scenario, "Sandboxes with egress Ready, idle for"),
			strings.Contains(r.Scenario, "Sandboxes with egress deleted"):
			egressScale = append(egressScale, r)
		case strings.HasPrefix(r.Scenario, "Memory a suspension frees"):
			memory = append(memory, r)
		case strings.Contains(r.Scenario, "Sandboxes created at once, until all Ready"):
			// Memory per sandbox: no CLI baseline.
		case strings.HasPrefix(r.Scenario, "Host memory per idle member"):
			// A difference of MemAvailable: with few members, the page
			// cache may move more than they cost.
			if !strings.Contains(r.Controller, "MiB per member") || !strings.Contains(r.Baseline, "MiB per container") {
				t.Errorf("member memory row without figures: %+v", r)
			}
		case strings.HasPrefix(r.Scenario, "Requests per Ticket"):
			requests = append(requests, r)
		case strings.Contains(r.Scenario, "in per-node mode"):
			placement = append(placement, r)
		case strings.HasPrefix(r.Scenario, "Per-node mode: "):
			forward = append(forward, r)
			if r.Controller == "" || !strings.HasPrefix(r.Baseline, "served by the receiving manager ") && !strings.HasPrefix(r.Baseline, "docker CLI ") ||
				!strings.HasSuffix(r.Ratio, "x") {
				t.Errorf("forward row without figures: %+v", r)
			}
		default:
			if r.Controller == "" || r.Baseline == "" || !strings.HasSuffix(r.Ratio, "x") {
				t.Errorf("row without figures: %+v", r)
			}
		}
	}
	if len(rows) != 43 || idle == nil || len(egressScale) != 3 || len(memory) != 2 || len(requests) != 1 || len(placement) != 2 ||
		len(forward) != 3 || len(runtimes) != 13 {
		t.Fatalf("want 43 rows (the exec row, 6 of warm pools, an idle row, 3 of egress at scale, 2 of memory a suspension frees, "+
			"4 of the user's tickets, 2 of placement, 2 of forwards and a move, 13 of runsc against runc), got %d:\n%+v", len(rows), rows)
	}
	checkWritten(t, cfg, rows)
	if r := requests[0]; !strings.Contains(r.Controller, "container_create") || !strings.Contains(r.Controller, "sandboxes/status") {
		t.Errorf("the requests per ticket name neither the container's creation nor the sandbox's status: %+v", r)
	}
	for _, r := range memory {
		if !strings.Contains(r.Controller, "MiB working set stopped") {
			t.Errorf("memory row without figures: %+v", r)
		}
	}
	if !strings.Contains(idle.Controller, "Docker requests") {
		t.Errorf("idle row: %+v", idle)
	}
	// Idle, only the sweep's lists, the usage collector's one disk
	// measurement (when its period falls in the idle window, as it may
	// after the longer scenarios) and the ping of afe_docker_up that the
	// bench's own scrape of the metrics makes: nothing per sandbox.
	_, ops, _ := strings.Cut(idle.Controller, "(")
	ops, _, _ = strings.Cut(ops, ")")
	for _, op := range strings.Split(ops, ", ") {
		if name, _, _ := strings.Cut(op, " "); name != "none" && !idleOp(name) {
			t.Errorf("idle sandboxes cost %s requests: %s", name, idle.Controller)
		}
	}
	// Egress at scale: every figure measured.
	const dur = `(\d+ ms|\d+(\.\d+)? s)`
	for i, re := range []string{
		`^` + dur + `; one Ready every \d+\.\d+ s over the first 1, every \d+\.\d+ s over the last 1$`,
		`^host memory -?\d+\.\d MiB per sandbox with its proxy \(squid [1-9]\d*\.\d MiB resident\); manager RSS [1-9]\d* MiB; engine and proxies CPU \d+% of a core$`,
		`^` + dur + `$`,
	} {
		if got := egressScale[i].Controller; !regexp.MustCompile(re).MatchString(got) {
			t.Errorf("egress-scale row %d: %q does not match %s", i, got, re)
		}
	}
	// Placement: 3 nodes against 1, and every ticket on one of the 3.
	for i, re := range []string{
		`^` + dur + ` on 3 nodes \((\d+)/(\d+)/(\d+) tickets\)$`,
		`^` + dur + ` on 3 nodes$`,
	} {
		r := placement[i]
		m := regexp.MustCompile(re).FindStringSubmatch(r.Controller)
		if m == nil || !regexp.MustCompile(`^1 node `+dur+`$`).MatchString(r.Baseline) || !strings.HasSuffix(r.Ratio, "x") {
			t.Errorf("placement row %d: %+v does not match %s, 1 node <time>, <ratio>x", i, r, re)
			continue
		}
		if i == 0 {
			sum := 0
			for _, c := range m[len(m)-3:] {
				n, _ := strconv.Atoi(c)
				sum += n
			}
			if sum != cfg.PlacementTickets {
				t.Errorf("placement spread %s holds %d tickets, want %d", r.Controller, sum, cfg.PlacementTickets)
			}
		}
	}
	pid := os.Getpid()
	instance := "bench-" + strconv.Itoa(pid)
	for _, inst := range []string{instance, "bench-cli-" + strconv.Itoa(pid),
		placementNode(instance, 1), placementNode(instance, 2), placementNode(instance, 3)} {
		left, err := dockertest.Objects(afev1.LabelController + "=" + inst)
		if err != nil {
			t.Errorf("list what is left: %v", err)
		}
		if len(left) > 0 {
			t.Errorf("left behind: %v", left)
		}
	}
}

// checkWritten writes what `make bench` leaves in -out for the smoke run's
// rows and checks it: the table, the rows with the samples and series
// behind them in results.json, and every figure, whose files decode.
func checkWritten(t *testing.T, cfg config, rows []row) {
	t.Helper()
	written, err := writeResults(cfg.Out, rows)
	if err != nil {
		t.Fatalf("write the results: %v", err)
	}
	want := []string{"results.md", "results.json", "latency.png", "latency.svg", "runtimes.png", "runtimes.svg",
		"egress-scale-creation.png", "egress-scale-creation.svg", "memory.png", "memory.svg"}
	if diff := cmp.Diff(want, written); diff != "" {
		t.Errorf("files written (-want +got):\n%s", diff)
	}
	for _, name := range written[2:] {
		checkFigure(t, filepath.Join(cfg.Out, name))
	}
	got := map[string][]row{}
	for _, r := range readResults(t, filepath.Join(cfg.Out, "results.json")).Rows {
		got[r.Key] = append(got[r.Key], r)
	}
	if s := got["sandbox"][0].Samples; s == nil || len(s.Controller) != cfg.Reps || len(s.Baseline) != cfg.Reps || s.Unit != "s" {
		t.Errorf("the sandbox row's samples: %+v, want %d a side in seconds", s, cfg.Reps)
	}
	if c := got["egress-scale"][0].Ready; c == nil || len(c.Ready) != cfg.EgressScale || !slices.IsSorted(c.Ready) || c.Ready[0] <= 0 {
		t.Errorf("the egress-scale creation curve: %+v, want %d times to Ready, in order", c, cfg.EgressScale)
	}
	counts := func(m *memorySeries) (out []int) {
		for _, p := range m.Points {
			out = append(out, p.Count)
		}
		return out
	}
	if m := got["idle"][0].Memory; m == nil || !slices.Equal(counts(m), []int{1, 2, cfg.Idle}) {
		t.Errorf("the idle memory series: %+v, want points at 1, 2 and %d sandboxes", m, cfg.Idle)
	}
	if m := got["egress-scale"][1].Memory; m == nil || !slices.Equal(counts(m), []int{cfg.EgressScale}) {
		t.Errorf("the egress-scale memory: %+v, want a point at %d sandboxes", m, cfg.EgressScale)
	}
}

// managerErrors returns the lines of the manager's log that report an
// error, then its last lines, at most n of each: what a failed smoke run
// needs to be told apart, the log itself going with the test's folder.
func managerErrors(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	var errs []string
	for i, l := range lines {
		lines[i] = l[:min(len(l), 400)]
		if strings.Contains(l, `"level":"error"`) {
			errs = append(errs, lines[i])
		}
	}
	errs = errs[max(0, len(errs)-n):]
	return strings.Join(errs, "\n") + "\n...\n" + strings.Join(lines[max(0, len(lines)-n):], "\n")
}
