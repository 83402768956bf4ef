package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// `make run` without KUBECONFIG: the control plane comes up with the CRDs,
// the command runs with KUBECONFIG set, and SIGTERM stops the command and
// the control plane with it.
func TestSIGTERMStopsTheCommandAndTheControlPlane(t *testing.T) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = filepath.Join("..", "..", "bin", "envtest", "1.37.2")
	}
	if _, err := os.Stat(filepath.Join(assets, "kube-apiserver")); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no control plane binaries in %s (make envtest)", assets)
		}
		t.Skipf("no control plane binaries in %s (make envtest)", assets)
	}
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "localcp")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	dir := filepath.Join(tmp, "state")
	// The command proves the CRDs are installed, then waits for the signal
	// like the manager does.
	cmd := exec.Command(bin, "--assets", assets, "--dir", dir, "--crds", filepath.Join("..", "..", "config", "crd", "bases"), "--",
		"sh", "-c", `kubectl get crd sandboxes.sandbox.afe.dev tickets.sandbox.afe.dev runs.sandbox.afe.dev >/dev/null && echo ready $$ "$KUBECONFIG" && exec sleep 600`)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()

	ready := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			if rest, ok := strings.CutPrefix(s.Text(), "ready "); ok {
				ready <- rest
			}
		}
	}()
	var line string
	select {
	case line = <-ready:
	case <-time.After(2 * time.Minute):
		t.Fatal("the command did not see the control plane and its CRDs")
	}
	pid, kubeconfig, _ := strings.Cut(line, " ")
	if want := filepath.Join(dir, "kubeconfig"); kubeconfig != want {
		t.Fatalf("KUBECONFIG=%q, want %q", kubeconfig, want)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		t.Logf("localcp ended: %v", err) // sleep dies of the signal; the manager exits 0
	case <-time.After(30 * time.Second):
		t.Fatal("localcp did not stop on SIGTERM")
	}
	// Nothing started for this state folder is left: not the command, not
	// etcd, not kube-apiserver.
	if _, err := os.Stat("/proc/" + pid); err == nil {
		t.Fatalf("the command (pid %s) still runs after SIGTERM", pid)
	}
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
