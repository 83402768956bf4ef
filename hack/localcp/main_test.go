package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"afe.dev/sandbox/internal/nosuidroot"
	"afe.dev/sandbox/test/testenv"
)

// `make run` without KUBECONFIG: the control plane comes up with the CRDs,
// the command runs with KUBECONFIG set, and SIGTERM stops the command and
// the control plane with it.
func TestSIGTERMStopsTheCommandAndTheControlPlane(t *testing.T) {
	assets := assets(t, "kube-apiserver")
	bin := buildLocalcp(t)
	dir := filepath.Join(t.TempDir(), "state")
	// The command proves the CRDs are installed, then waits for the signal
	// like the manager does.
	cmd := exec.Command(bin, "--assets", assets, "--dir", dir, "--crds", filepath.Join("..", "..", "config", "crd", "bases"), "--",
		"sh", "-c", `kubectl get crd sandboxes.sandbox.afe.dev tickets.sandbox.afe.dev runs.sandbox.afe.dev >/dev/null && echo ready $$ "$KUBECONFIG" && exec sleep 600`)
	lp := start(t, cmd)

	var line string
	for timeout := time.After(2 * time.Minute); line == ""; {
		select {
		case l := <-lp.lines:
			line, _ = strings.CutPrefix(l, "ready ")
		case <-timeout:
			t.Fatal("the command did not see the control plane and its CRDs")
		}
	}
	pid, kubeconfig, _ := strings.Cut(line, " ")
	if want := filepath.Join(dir, "kubeconfig"); kubeconfig != want {
		t.Fatalf("KUBECONFIG=%q, want %q", kubeconfig, want)
	}

	t.Logf("localcp ended: %v", lp.stop(t)) // sleep dies of the signal; the manager exits 0
	// Nothing started for this state folder is left: not the command, not
	// etcd, not kube-apiserver.
	if _, err := os.Stat("/proc/" + pid); err == nil {
		t.Fatalf("the command (pid %s) still runs after SIGTERM", pid)
	}
	assertStopped(t, dir, kubeconfig)
}

// `make run NODES=2`: kube-scheduler places Pods on the nodes node-1 and
// node-2, the command runs once per node with its own arguments and
// KUBECONFIG, and SIGTERM reaches each once and stops everything. Started
// again with fewer nodes, the node left over is not ready.
func TestNodesRunTheCommandOncePerNode(t *testing.T) {
	assets := assets(t, "kube-apiserver", "kube-scheduler")
	bin := buildLocalcp(t)
	dir := filepath.Join(t.TempDir(), "state")
	// Like the manager, the command waits for SIGTERM and then ends 0.
	script := `trap 'kill $!; echo stopped; exit 0' TERM
sleep 600 &
echo "args $* kubeconfig $KUBECONFIG"
wait`
	cmd := exec.Command(bin, "--assets", assets, "--dir", dir, "--crds", filepath.Join("..", "..", "config", "crd", "bases"), "--nodes", "2", "--",
		"sh", "-c", script, "sh", dir+"/{node}/run-logs", "{node-1}--access-register")
	lp := start(t, cmd)
	kubeconfig := filepath.Join(dir, "kubeconfig")
	lp.expect(t, map[string]bool{
		"[node-1] args " + dir + "/node-1/run-logs --access-register --per-node --instance=node-1 kubeconfig " + kubeconfig: true,
		"[node-2] args " + dir + "/node-2/run-logs --per-node --instance=node-2 kubeconfig " + kubeconfig:                   true,
	})

	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, name := range []string{"node-1", "node-2"} {
		node, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if cpu := node.Status.Allocatable.Cpu().Value(); cpu != int64(runtime.NumCPU()) || node.Status.Allocatable.Memory().IsZero() {
			t.Fatalf("%s allocatable %v, want the host's %d CPUs and its memory", name, node.Status.Allocatable, runtime.NumCPU())
		}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "placed"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}},
	}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := cs.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
		return err == nil && strings.HasPrefix(got.Spec.NodeName, "node-"), err
	})
	if err != nil {
		t.Fatalf("the Pod was not bound to a node: %v", err)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	lp.expect(t, map[string]bool{"[node-1] stopped": true, "[node-2] stopped": true})
	if err := lp.wait(t); err != nil {
		t.Fatalf("localcp ended with %v, want 0 as its commands", err)
	}
	assertStopped(t, dir, kubeconfig)

	// Again with one node: node-2, whose manager is gone, is not ready.
	again := exec.Command(bin, "--assets", assets, "--dir", dir, "--crds", filepath.Join("..", "..", "config", "crd", "bases"), "--nodes", "1")
	lpAgain := start(t, again)
	ready := map[string]corev1.ConditionStatus{}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		// Each start makes new certificates and a new kubeconfig.
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return false, nil // not written yet
		}
		cs := kubernetes.NewForConfigOrDie(cfg)
		for _, name := range []string{"node-1", "node-2"} {
			node, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil // not up yet
			}
			for _, c := range node.Status.Conditions {
				if c.Type == corev1.NodeReady {
					ready[name] = c.Status
				}
			}
		}
		return ready["node-2"] == corev1.ConditionUnknown, nil
	})
	if err != nil || ready["node-1"] != corev1.ConditionTrue {
		t.Fatalf("after a restart with one node: Ready %v (%v), want node-1 True and node-2 Unknown", ready, err)
	}
	if err := lpAgain.stop(t); err != nil {
		t.Fatalf("localcp without a command ended with %v", err)
	}
	assertStopped(t, dir, kubeconfig)
}

func assets(t *testing.T, binaries ...string) string {
	t.Helper()
	return testenv.RequireAssets(t, binaries...)
}

func buildLocalcp(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "localcp")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

// localcpRun is a localcp started by a test.
type localcpRun struct {
	cmd    *exec.Cmd
	lines  chan string   // its stdout
	exited chan struct{} // closed when it has ended
	err    error         // how it ended, once exited is closed
}

// start starts localcp. However the test ends, localcp is stopped: SIGTERM
// first, so that it stops what it started, SIGKILL if it will not.
func start(t *testing.T, cmd *exec.Cmd) *localcpRun {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &localcpRun{cmd: cmd, lines: make(chan string, 1000), exited: make(chan struct{})}
	go func() {
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			r.lines <- s.Text()
		}
		r.err = cmd.Wait()
		close(r.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-r.exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
		}
	})
	return r
}

// expect waits for each of the lines want, in any order among others.
func (r *localcpRun) expect(t *testing.T, want map[string]bool) {
	t.Helper()
	timeout := time.After(2 * time.Minute)
	for len(want) > 0 {
		select {
		case line := <-r.lines:
			t.Logf("output: %s", line)
			delete(want, line)
		case <-timeout:
			t.Fatalf("no lines %v", want)
		}
	}
}

// stop sends SIGTERM to localcp and returns how it ended.
func (r *localcpRun) stop(t *testing.T) error {
	t.Helper()
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	return r.wait(t)
}

// wait waits for localcp to end and returns how.
func (r *localcpRun) wait(t *testing.T) error {
	t.Helper()
	select {
	case <-r.exited:
		return r.err
	case <-time.After(30 * time.Second):
		t.Fatal("localcp did not stop on SIGTERM")
		return nil
	}
}

// assertStopped fails when a process whose command line names dir still
// runs, or the API server still answers.
func assertStopped(t *testing.T, dir, kubeconfig string) {
	t.Helper()
	var left []string
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(b), dir) {
			left = append(left, strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	if len(left) > 0 {
		t.Fatalf("still running after SIGTERM:\n%s", strings.Join(left, "\n"))
	}
	if out, err := exec.Command("kubectl", "--kubeconfig", kubeconfig, "--request-timeout", "3s", "get", "ns").CombinedOutput(); err == nil {
		t.Fatalf("the API server still answers after SIGTERM:\n%s", out)
	}
}

// makeRunLocalcpArgs is what `make run` gives localcp besides --assets,
// --dir and --crds, as make computes it, with the workspace root at
// workspaces; localcp runs from the repository's root. Each localcp of the
// run recipe is checked to get them.
func makeRunLocalcpArgs(t *testing.T, workspaces string) []string {
	t.Helper()
	makefile, err := os.ReadFile(filepath.Join("..", "..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(makefile), "\n") {
		if strings.Contains(line, "$(LOCALBIN)/localcp --") {
			n++
			if !strings.Contains(line, "$(LOCALCP_ARGS)") {
				t.Fatalf("make run starts localcp without $(LOCALCP_ARGS): %s", line)
			}
		}
	}
	if n != 2 {
		t.Fatalf("found %d localcp command lines in the Makefile, want 2 (one node, NODES)", n)
	}
	cmd := exec.Command("make", "-s", "--no-print-directory", "--eval", "print-localcp-args: ; @echo $(LOCALCP_ARGS)",
		"print-localcp-args", "LOCAL_WORKSPACES="+workspaces)
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("make: %v", err)
	}
	return strings.Fields(string(out))
}

// `make run`, as a new user tries the README: the ClusterRoles docs/access.md documents
// are installed with the CRDs, so that a RoleBinding to afe-sandbox-user
// lets a user exec into sandboxes of the namespace (and afe-sandbox-viewer
// does not); the Folder workspace root is mounted nosuid,nodev while it
// runs, and unmounted at the end.
func TestMakeRunInstallsTheAccessRolesAndMountsTheWorkspaceRoot(t *testing.T) {
	assets := assets(t, "kube-apiserver")
	if os.Geteuid() != 0 {
		t.Skip("mounting the workspace root needs root")
	}
	bin := buildLocalcp(t)
	assetsAbs, err := filepath.Abs(assets)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "state")
	workspaces := filepath.Join(t.TempDir(), "workspaces")
	args := append([]string{"--assets", assetsAbs, "--dir", dir, "--crds", "config/crd/bases"}, makeRunLocalcpArgs(t, workspaces)...)
	cmd := exec.Command(bin, append(args, "--", "sh", "-c", `echo ready; exec sleep 600`)...)
	cmd.Dir = filepath.Join("..", "..")
	lp := start(t, cmd)
	lp.expect(t, map[string]bool{"ready": true})

	if ok, err := nosuidroot.Safe(workspaces); err != nil || !ok {
		t.Fatalf("the workspace root is not mounted nosuid,nodev while make run runs (%v)", err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	for _, role := range []string{"afe-sandbox-user", "afe-sandbox-viewer"} {
		if _, err := cs.RbacV1().ClusterRoles().Get(ctx, role, metav1.GetOptions{}); err != nil {
			t.Fatalf("ClusterRole %s: %v", role, err)
		}
	}
	// docs/access.md's binding, and a viewer's.
	for user, role := range map[string]string{"alice": "afe-sandbox-user", "bob": "afe-sandbox-viewer"} {
		if _, err := cs.RbacV1().RoleBindings("default").Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: user},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	allowed := func(user, verb, resource, sub, ns string) bool {
		t.Helper()
		sar, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb,
				Group: "access.sandbox.afe.dev", Resource: resource, Subresource: sub},
		}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return sar.Status.Allowed
	}
	for _, c := range []struct {
		user, verb, resource, sub, ns string
		want                          bool
	}{
		{"alice", "create", "sandboxes", "exec", "default", true},
		{"alice", "create", "sandboxes", "exec", "kube-system", false},
		{"bob", "create", "sandboxes", "exec", "default", false},
		{"bob", "get", "runs", "log", "default", true},
	} {
		// The API server's authorizer sees a new binding from its cache, a
		// moment after its creation: an allowed access may take that long.
		got := allowed(c.user, c.verb, c.resource, c.sub, c.ns)
		for deadline := time.Now().Add(10 * time.Second); got != c.want && c.want && time.Now().Before(deadline); {
			time.Sleep(100 * time.Millisecond)
			got = allowed(c.user, c.verb, c.resource, c.sub, c.ns)
		}
		if got != c.want {
			t.Errorf("%s %s %s/%s in %s: allowed %v, want %v", c.user, c.verb, c.resource, c.sub, c.ns, got, c.want)
		}
	}

	t.Logf("localcp ended: %v", lp.stop(t))
	mountinfo, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(mountinfo), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == workspaces {
			t.Fatalf("the workspace root is still mounted after make run ended: %s", line)
		}
	}
}
