package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"afe.dev/sandbox/test/testenv"
)

// testImage is built by `make images`.
const testImage = "afe/busybox:dev"

var engine *Client

func TestMain(m *testing.M) {
	c, err := New("")
	if err == nil {
		err = testenv.WaitForEngine(c.Ping)
	}
	if err != nil {
		if testenv.DockerRequired() {
			fmt.Fprintf(os.Stderr, "Docker is required here (CI or make test) and the engine is unavailable: %v\n", err)
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "skipping the docker package tests: no engine: %v\n", err)
		os.Exit(0)
	}
	engine = c
	for _, rt := range testRuntimes() {
		if _, err := c.Runtime(context.Background(), rt); err != nil {
			fmt.Fprintf(os.Stderr, "AFE_TEST_RUNTIMES names runtime %q, which the engine lacks (run `make runsc`): %v\n", rt, err)
			os.Exit(1)
		}
	}
	os.Exit(m.Run())
}

// testRuntimes are the runtimes the engine tests run under, each one:
// AFE_TEST_RUNTIMES (make test: runc,runsc), or runc alone.
func testRuntimes() []string {
	var out []string
	for _, rt := range strings.Split(os.Getenv("AFE_TEST_RUNTIMES"), ",") {
		if rt = strings.TrimSpace(rt); rt != "" {
			out = append(out, rt)
		}
	}
	if len(out) == 0 {
		out = []string{"runc"}
	}
	return out
}

// forEachRuntime runs the test under each of testRuntimes.
func forEachRuntime(t *testing.T, test func(t *testing.T, runtime string)) {
	for _, rt := range testRuntimes() {
		t.Run(rt, func(t *testing.T) { test(t, rt) })
	}
}

// testLabels labels a test's objects and removes them when it ends.
func testLabels(t *testing.T) map[string]string {
	t.Helper()
	labels := map[string]string{"afe.test": fmt.Sprintf("%s-%d", strings.ToLower(t.Name()), time.Now().UnixNano())}
	t.Cleanup(func() {
		ctx := context.Background()
		cs, _ := engine.ListContainers(ctx, labels)
		for _, c := range cs {
			_ = engine.RemoveContainer(ctx, c.ID)
		}
		ns, _ := engine.ListNetworks(ctx, labels)
		for _, n := range ns {
			_ = engine.RemoveNetwork(ctx, n.ID)
		}
		vs, _ := engine.ListVolumes(ctx, labels)
		for _, v := range vs {
			_ = engine.RemoveVolume(ctx, v.Name)
		}
	})
	return labels
}

func uniqueName() string {
	return fmt.Sprintf("afe-test-%d", time.Now().UnixNano())
}

func sh(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("docker", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("docker %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// A volume is made once, and reports when it was made (the newest of a
// ticket's snapshots is chosen by it).
func TestVolumeIsIdempotent(t *testing.T) {
	ctx := context.Background()
	labels := testLabels(t)
	name := uniqueName()
	start := time.Now().Add(-time.Minute) // the engine's clock is the host's, kept to the second
	var created time.Time
	for i := 0; i < 2; i++ {
		v, err := engine.EnsureVolume(ctx, VolumeSpec{Name: name, Labels: labels})
		if err != nil {
			t.Fatalf("ensure %d: %v", i, err)
		}
		if v.Name != name || !labelsMatch(v.Labels, labels) {
			t.Fatalf("got %+v", v)
		}
		if v.Created.Before(start) || v.Created.After(time.Now().Add(time.Minute)) || i > 0 && !v.Created.Equal(created) {
			t.Fatalf("ensure %d: created at %v, want the time of the first ensure (after %v)", i, v.Created, start)
		}
		created = v.Created
	}
	if vs, err := engine.ListVolumes(ctx, labels); err != nil || len(vs) != 1 || !vs[0].Created.Equal(created) {
		t.Fatalf("list: %v %v", vs, err)
	}
	if v, err := engine.InspectVolume(ctx, name); err != nil || !v.Created.Equal(created) {
		t.Fatalf("inspect: %+v %v", v, err)
	}
	for i := 0; i < 2; i++ {
		if err := engine.RemoveVolume(ctx, name); err != nil {
			t.Fatalf("remove %d: %v", i, err)
		}
	}
	if _, err := engine.InspectVolume(ctx, name); !errors.Is(err, ErrNotFound) {
		t.Fatalf("inspect after remove: %v", err)
	}
}

func TestRunContainerHardenedWithOwnedVolume(t *testing.T) {
	forEachRuntime(t, testRunContainerHardenedWithOwnedVolume)
}

func testRunContainerHardenedWithOwnedVolume(t *testing.T, runtime string) {
	ctx := context.Background()
	labels := testLabels(t)
	name := uniqueName()
	if _, err := engine.EnsureVolume(ctx, VolumeSpec{Name: name, Labels: labels}); err != nil {
		t.Fatal(err)
	}
	spec := ContainerSpec{
		Name:        name,
		Image:       testImage,
		Command:     []string{"sh", "-c", "touch /workspace/hello && sleep 600"},
		User:        "1000:1000",
		Labels:      labels,
		Network:     "none",
		Mounts:      []Mount{{Type: MountVolume, Source: name, Target: "/workspace", Owner: &Owner{UID: 1000, GID: 1000}}},
		NanoCPUs:    500_000_000,
		MemoryBytes: 64 << 20,
		// Under gVisor the host counts the user-space kernel's threads
		// (about 40 idle): a host limit of 64 would end it.
		PidsLimit:       1024,
		CapDrop:         []string{"ALL"},
		NoNewPrivileges: true,
		Init:            true,
		Runtime:         runtime,
	}
	c, err := engine.RunContainer(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Running || c.Name != name || c.StartedAt.IsZero() {
		t.Fatalf("not running: %+v", c)
	}
	// A second call finds the same container.
	again, err := engine.RunContainer(ctx, spec)
	if err != nil || again.ID != c.ID {
		t.Fatalf("second run: %v %+v", err, again)
	}
	// The fresh volume is writable by the non-root user.
	deadline := time.Now().Add(10 * time.Second)
	for sh(t, "exec", name, "sh", "-c", "ls /workspace") != "hello" {
		if time.Now().After(deadline) {
			t.Fatal("the sandbox user could not write to /workspace")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := sh(t, "inspect", "-f", "{{.HostConfig.CapDrop}} {{.HostConfig.SecurityOpt}} {{.HostConfig.Init}} {{.HostConfig.Memory}} {{.HostConfig.MemorySwap}} {{.HostConfig.PidsLimit}} {{.HostConfig.NanoCpus}} {{.HostConfig.NetworkMode}} {{.HostConfig.Runtime}}", name); got != "[ALL] [no-new-privileges:true] true 67108864 67108864 1024 500000000 none "+runtime {
		t.Fatalf("host config: %s", got)
	}
	if have, err := engine.InspectContainer(ctx, name); err != nil || have.Runtime != runtime {
		t.Fatalf("inspect: runtime %q, %v; want %q", have.Runtime, err, runtime)
	}
	// Another object's labels: never adopted.
	other := spec
	other.Labels = map[string]string{"afe.test": labels["afe.test"], "afe.sandbox-uid": "someone-else"}
	if _, err := engine.RunContainer(ctx, other); !errors.Is(err, ErrConflict) {
		t.Fatalf("conflict expected, got %v", err)
	}
	list, err := engine.ListContainers(ctx, labels)
	if err != nil || len(list) != 1 || list[0].ID != c.ID || !list[0].Running {
		t.Fatalf("list: %v %+v", err, list)
	}
	for i := 0; i < 2; i++ {
		if err := engine.RemoveContainer(ctx, name); err != nil {
			t.Fatalf("remove %d: %v", i, err)
		}
	}
	if _, err := engine.InspectContainer(ctx, name); !errors.Is(err, ErrNotFound) {
		t.Fatalf("inspect after remove: %v", err)
	}
}

func TestRunContainerThatCannotStartLeavesNothing(t *testing.T) {
	ctx := context.Background()
	labels := testLabels(t)
	name := uniqueName()
	_, err := engine.RunContainer(ctx, ContainerSpec{
		Name: name, Image: testImage, Labels: labels, Network: "none",
		Command: []string{"/does/not/exist"},
	})
	if !errors.Is(err, ErrStartFailed) {
		t.Fatalf("err = %v, want ErrStartFailed", err)
	}
	if _, err := engine.InspectContainer(ctx, name); !errors.Is(err, ErrNotFound) {
		t.Fatalf("container left behind: %v", err)
	}
}

// A volume mount whose volume is gone (removed between its creation and the
// container's) makes the engine create it: with the mount's labels, so it
// is found by them and removed like the one it replaces.
func TestVolumeMadeByTheEngineCarriesTheMountLabels(t *testing.T) {
	ctx := context.Background()
	labels := testLabels(t)
	name := uniqueName()
	if _, err := engine.RunContainer(ctx, ContainerSpec{
		Name: name, Image: testImage, Labels: labels, Network: "none", Command: []string{"sleep", "60"},
		Mounts: []Mount{{Type: MountVolume, Source: name + "-ws", Target: "/workspace", Labels: labels}},
	}); err != nil {
		t.Fatal(err)
	}
	vs, err := engine.ListVolumes(ctx, labels)
	if err != nil || len(vs) != 1 || vs[0].Name != name+"-ws" {
		t.Fatalf("volumes with the mount's labels: %+v %v", vs, err)
	}
}

func TestEnsureImage(t *testing.T) {
	ctx := context.Background()
	if err := engine.EnsureImage(ctx, testImage); err != nil {
		t.Fatalf("local image: %v", err)
	}
	// A registry on loopback that refuses: the pull fails with a reason.
	err := engine.EnsureImage(ctx, "127.0.0.1:1/afe/missing:never")
	var pe *PullError
	if !errors.As(err, &pe) || pe.Reason == "" {
		t.Fatalf("want a PullError, got %v", err)
	}
	if err := engine.EnsureImage(ctx, "Not A Ref"); !errors.As(err, &pe) {
		t.Fatalf("want a PullError for a bad reference, got %v", err)
	}
}

func TestEventsReportDeathAndDestroy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	labels := testLabels(t)
	// From now: the stream may open after the container is made.
	events, errs := engine.Events(ctx, labels, time.Now())
	name := uniqueName()
	if _, err := engine.RunContainer(ctx, ContainerSpec{
		Name: name, Image: testImage, Labels: labels, Network: "none", Command: []string{"sleep", "600"},
	}); err != nil {
		t.Fatal(err)
	}
	removed := time.Now()
	if err := engine.RemoveContainer(ctx, name); err != nil {
		t.Fatal(err)
	}
	seen := map[EventAction]bool{}
	for !seen[ActionDestroy] {
		select {
		case ev := <-events:
			if ev.Name == name {
				seen[ev.Action] = true
			}
		case err := <-errs:
			t.Fatalf("event stream: %v", err)
		case <-ctx.Done():
			t.Fatalf("saw only %v", seen)
		}
	}
	if !seen[ActionStart] || !seen[ActionDie] {
		t.Fatalf("saw %v", seen)
	}
	if d := time.Since(removed); d > 5*time.Second {
		t.Fatalf("destroy reported after %s", d)
	}
}

func TestUnavailableEngine(t *testing.T) {
	c, err := New("unix:///nonexistent/docker.sock")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(context.Background()); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("want ErrUnavailable, got %v", err)
	}
	if _, err := c.InspectContainer(context.Background(), "x"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("want ErrUnavailable, got %v", err)
	}
}

func TestNetworkIsIdempotentAndInternal(t *testing.T) {
	ctx := context.Background()
	labels := testLabels(t)
	name := uniqueName()
	t.Cleanup(func() { _ = engine.RemoveNetwork(context.Background(), name) })
	spec := NetworkSpec{Name: name, Labels: labels, Internal: true, NoHostAddress: true}
	n1, err := engine.EnsureNetwork(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	n2, err := engine.EnsureNetwork(ctx, spec)
	if err != nil || n2.ID != n1.ID || !n2.Internal || !labelsMatch(n2.Labels, labels) {
		t.Fatalf("second ensure: %v %+v", err, n2)
	}
	if got := sh(t, "network", "inspect", "-f", `{{.Internal}} {{index .Options "com.docker.network.bridge.inhibit_ipv4"}}`, name); got != "true true" {
		t.Fatalf("network: %s", got)
	}
	if list, err := engine.ListNetworks(ctx, labels); err != nil || len(list) != 1 {
		t.Fatalf("list: %v %v", err, list)
	}
	for i := 0; i < 2; i++ {
		if err := engine.RemoveNetwork(ctx, name); err != nil {
			t.Fatalf("remove %d: %v", i, err)
		}
	}
	if _, err := engine.InspectNetwork(ctx, name); !errors.Is(err, ErrNotFound) {
		t.Fatalf("inspect after remove: %v", err)
	}
	// A prefix of a network's ID is not that network: the engine would
	// resolve it, the client does not.
	kept, err := engine.EnsureNetwork(ctx, NetworkSpec{Name: name + "-kept", Labels: labels})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = engine.RemoveNetwork(ctx, kept.ID) }()
	if n, err := engine.InspectNetwork(ctx, kept.ID[:12]); !errors.Is(err, ErrNotFound) {
		t.Fatalf("inspect by an ID prefix: %v %+v, want ErrNotFound", err, n)
	}
	if n, err := engine.InspectNetwork(ctx, kept.ID); err != nil || n.Name != name+"-kept" {
		t.Fatalf("inspect by the whole ID: %v %+v", err, n)
	}
}

func TestExecReturnsOutputAndExitCode(t *testing.T) {
	ctx := context.Background()
	labels := testLabels(t)
	name := uniqueName()
	if _, err := engine.RunContainer(ctx, ContainerSpec{
		Name: name, Image: testImage, Labels: labels, Network: "none", Command: []string{"sleep", "600"}, User: "1000:1000",
	}); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr strings.Builder
	code, err := engine.Exec(ctx, name, ExecSpec{
		Cmd:        []string{"sh", "-c", "echo out:$FOO; echo err >&2; pwd; id -u; exit 3"},
		Env:        []string{"FOO=bar"},
		WorkingDir: "/tmp",
		User:       "1000:1000",
		Stdout:     &stdout,
		Stderr:     &stderr,
	})
	if err != nil || code != 3 {
		t.Fatalf("code %d, err %v", code, err)
	}
	if stdout.String() != "out:bar\n/tmp\n1000\n" || stderr.String() != "err\n" {
		t.Fatalf("stdout %q stderr %q", stdout.String(), stderr.String())
	}
	if _, err := engine.Exec(ctx, "afe-no-such-container", ExecSpec{Cmd: []string{"true"}}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("want ErrNotFound, got %v", err)
	}
}

// Processes lists the workload's processes from outside its reach under
// every runtime: the engine's list under runc; under gVisor, whose
// processes are not host processes (no host process has the group), the
// user-space kernel's own.
func TestProcessesSeesEveryGroupFromOutside(t *testing.T) {
	forEachRuntime(t, testProcessesSeesEveryGroupFromOutside)
}

func testProcessesSeesEveryGroupFromOutside(t *testing.T, runtime string) {
	ctx := context.Background()
	labels := testLabels(t)
	name := uniqueName()
	c, err := engine.RunContainer(ctx, ContainerSpec{
		Name: name, Image: testImage, Labels: labels, Network: "none", Command: []string{"sleep", "600"}, User: "1000:1000",
		Runtime: runtime,
	})
	if err != nil {
		t.Fatal(err)
	}
	const gid = 2000000123
	if _, err := engine.Exec(ctx, c.ID, ExecSpec{Cmd: []string{"sh", "-c", "sleep 300 >/dev/null 2>&1 &"}, User: fmt.Sprintf("1000:%d", gid)}); err != nil {
		t.Fatal(err)
	}
	ps, err := engine.Processes(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	tagged := 0
	for _, p := range ps {
		if p.HasGroup(gid) {
			tagged++
		}
	}
	if len(ps) < 2 || tagged != 1 {
		t.Fatalf("want the keep-alive and one process of group %d, got %+v", gid, ps)
	}
	rt, err := engine.Runtime(ctx, runtime)
	if err != nil {
		t.Fatal(err)
	}
	if host := hostProcessesOfGroup(t, gid); rt.UserSpaceKernel() == (host > 0) {
		t.Fatalf("runtime %s: %d host processes of group %d", runtime, host, gid)
	}
}

// GroupProcesses lists exactly the processes of a group under every
// runtime: one that made itself undumpable (its /proc directory may then be
// root's) included, the lister itself (under gVisor, a shell with the
// group) never.
func TestGroupProcessesFindsEveryProcessOfTheGroup(t *testing.T) {
	forEachRuntime(t, testGroupProcessesFindsEveryProcessOfTheGroup)
}

func testGroupProcessesFindsEveryProcessOfTheGroup(t *testing.T, runtime string) {
	ctx := context.Background()
	c, err := engine.RunContainer(ctx, ContainerSpec{
		Name: uniqueName(), Image: testImage, Labels: testLabels(t), Network: "none", Command: []string{"sleep", "600"},
		User: "1000:1000", Runtime: runtime,
	})
	if err != nil {
		t.Fatal(err)
	}
	const gid, other = 2000000124, 2000000125
	for _, e := range []struct {
		gid int
		cmd string
	}{
		{gid, "sleep 300 >/dev/null 2>&1 & afe-undumpable 300 >/dev/null 2>&1 &"},
		{other, "sleep 300 >/dev/null 2>&1 &"},
	} {
		if _, err := engine.Exec(ctx, c.ID, ExecSpec{Cmd: []string{"sh", "-c", e.cmd}, User: fmt.Sprintf("1000:%d", e.gid)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []struct{ gid, n int }{{gid, 2}, {other, 1}, {2000000126, 0}} {
		ps, err := engine.GroupProcesses(ctx, c.ID, want.gid)
		if err != nil {
			t.Fatal(err)
		}
		live := 0
		for _, p := range ps {
			if !p.HasGroup(want.gid) {
				t.Fatalf("group %d: listed %+v", want.gid, p)
			}
			if !p.Zombie() {
				live++
			}
		}
		if live != want.n {
			t.Fatalf("group %d: want %d processes, got %+v", want.gid, want.n, ps)
		}
	}
	all, err := engine.Processes(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) < 4 {
		t.Fatalf("want the keep-alive and three processes, got %+v", all)
	}
}

// hostProcessesOfGroup counts the host's processes (as this test sees the
// host's /proc: the engine is local) whose real, effective or saved group
// is gid.
func hostProcessesOfGroup(t *testing.T, gid int) int {
	t.Helper()
	if !engine.IsLocal() {
		t.Skip("the engine's host processes are not visible here")
	}
	files, _ := filepath.Glob("/proc/[0-9]*/status")
	n := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			if f := strings.Fields(line); len(f) >= 4 && f[0] == "Gid:" && slices.Contains(f[1:4], strconv.Itoa(gid)) {
				n++
			}
		}
	}
	return n
}

func TestExecReturnsAtCancelWhileAProcessHoldsItsOutput(t *testing.T) {
	ctx := context.Background()
	labels := testLabels(t)
	name := uniqueName()
	c, err := engine.RunContainer(ctx, ContainerSpec{
		Name: name, Image: testImage, Labels: labels, Network: "none", Command: []string{"sleep", "600"}, User: "1000:1000",
	})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	start := time.Now()
	// A daemon that keeps the output stream open after its parent exits.
	_, err = engine.Exec(cctx, c.ID, ExecSpec{Cmd: []string{"sh", "-c", "echo started; (sleep 300 &); exit 0"}, Stdout: &out})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want the context's error, got %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Exec returned %s after its context ended", d)
	}
	if out.String() != "started\n" {
		t.Fatalf("output %q", out.String())
	}
}
