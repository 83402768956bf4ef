package tour

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	accessv1 "afe.dev/sandbox/api/access/v1alpha1"
)

const (
	// commandTimeout bounds one command of the tour (kubectl wait gives up
	// after 30 s of its own).
	commandTimeout = 2 * time.Minute
	// readyTimeout bounds the start of the control plane and the manager.
	readyTimeout = 90 * time.Second
	// stopTimeout is how long localcp has to stop everything after SIGINT,
	// as after Ctrl-C.
	stopTimeout = time.Minute
)

// shell runs the tour's commands with bash, one process each, in the
// module's root, as one terminal would: what a command exports is there
// for the next (kept in a file between them). It starts without
// KUBECONFIG, as the README's `make run` asks.
type shell struct {
	dir, state string
	env        []string
}

func newShell(t *testing.T, dir string) *shell {
	state := filepath.Join(t.TempDir(), "exports")
	if err := os.WriteFile(state, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return &shell{dir: dir, state: state, env: withoutKubeconfig(os.Environ())}
}

// run runs text and returns its exit code, its output (stdout and stderr
// together, as a terminal shows them) and how long it took; an error when
// it could not run or did not end within commandTimeout.
func (s *shell) run(text string) (int, string, time.Duration, error) {
	script := fmt.Sprintf(". '%s'\n%s\n__tour_rc=$?\nexport -p > '%s'\nexit $__tour_rc\n", s.state, text, s.state)
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "--noprofile", "--norc", "-c", script)
	cmd.Dir, cmd.Env = s.dir, s.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return -1, out.String(), took, fmt.Errorf("it did not end within %s", commandTimeout)
	case errors.As(err, &exit):
		return exit.ExitCode(), out.String(), took, nil
	case err != nil:
		return -1, out.String(), took, err
	}
	return 0, out.String(), took, nil
}

func withoutKubeconfig(env []string) []string {
	var out []string
	for _, e := range env {
		if !strings.HasPrefix(e, "KUBECONFIG=") {
			out = append(out, e)
		}
	}
	return out
}

// controlPlane is a running `make run`: localcp with the control plane and
// the manager under it.
type controlPlane struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// restart stops the running control plane, if any, as Ctrl-C would, and
// starts the Makefile's run command with the flags of RUN_ARGS, then the
// test's own: its --instance, and its metrics and probe addresses (not
// make run's fixed ports, which another manager on the machine may hold).
// It returns once the manager is ready.
func (tr *tourRun) restart(t *testing.T, runArgs []string) {
	t.Helper()
	if tr.cp != nil {
		err := tr.cp.stop()
		tr.cp = nil
		if err != nil {
			t.Fatal(err)
		}
	}
	probe := freeAddr(t)
	vars := map[string]string{"RUN_ARGS": strings.Join(append(runArgs,
		"--instance="+tr.instance, "--metrics-bind-address=0", "--health-probe-bind-address="+probe), " ")}
	for k, v := range tr.vars {
		vars[k] = v
	}
	argv, err := MakeRunCommand(tr.makefile, tr.paths, vars)
	if err != nil {
		t.Fatal(err)
	}
	log, err := os.OpenFile(tr.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = log.Close() }()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = tr.root, withoutKubeconfig(os.Environ()), log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	began := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tr.cp = &controlPlane{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(tr.cp.done) }()
	if err := tr.cp.waitReady(probe); err != nil {
		// The log first: a CI report keeps the start of a long message.
		t.Fatalf("make run: %v; the last lines of its log:\n%s\n(make run was: %s)", err, tail(tr.log, 25), strings.Join(argv, " "))
	}
	// The readiness probe checks the engine; `kubectl afe` needs the access
	// API, registered again on a new port at each start.
	if err := waitAccessAPI(filepath.Join(tr.paths.Dir, "kubeconfig")); err != nil {
		t.Fatalf("make run: %v\n%s", err, tail(tr.log, 40))
	}
	t.Logf("make run with RUN_ARGS %q: ready in %s", strings.Join(runArgs, " "), time.Since(began).Round(time.Millisecond))
}

// waitAccessAPI waits until the access API's APIService exists (the
// manager registers it once it serves) and is Available.
func waitAccessAPI(kubeconfig string) error {
	name := "apiservice/" + accessv1.Version + "." + accessv1.GroupName
	var out []byte
	for deadline := time.Now().Add(readyTimeout); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		var err error
		out, err = exec.Command("kubectl", "--kubeconfig", kubeconfig, "get", name,
			"-o", `jsonpath={.status.conditions[?(@.type=="Available")].status}`).CombinedOutput()
		if err == nil && string(out) == "True" {
			return nil
		}
	}
	return fmt.Errorf("the access API (%s) did not become Available within %s: %s", name, readyTimeout, out)
}

// waitReady waits until the manager's readiness probe answers 200.
func (c *controlPlane) waitReady(probe string) error {
	client := http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(readyTimeout)
	for time.Now().Before(deadline) {
		select {
		case <-c.done:
			return fmt.Errorf("it ended: %s", c.cmd.ProcessState)
		case <-time.After(200 * time.Millisecond):
		}
		resp, err := client.Get("http://" + probe + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
	}
	return fmt.Errorf("the manager was not ready within %s", readyTimeout)
}

// stop sends SIGINT to localcp, as Ctrl-C does, and waits for it to stop
// the manager and the control plane; past stopTimeout it kills them all.
func (c *controlPlane) stop() error {
	_ = c.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-c.done:
		return nil
	case <-time.After(stopTimeout):
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		<-c.done
		return fmt.Errorf("make run did not stop within %s of SIGINT: killed", stopTimeout)
	}
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

// tail is the last n lines of a file, for a failure's message.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	for i, l := range lines {
		lines[i] = l[:min(len(l), 300)] // a manager's JSON line can be kilobytes
	}
	return strings.Join(lines, "\n")
}
