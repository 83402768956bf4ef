package controlplane

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// schedulerUser is the identity kube-scheduler runs as: the API server's
// bootstrap RBAC grants it what a scheduler needs (ClusterRoles
// system:kube-scheduler and system:volume-scheduler) and nothing more, and
// the audit trail names it, as on a kubeadm cluster.
const schedulerUser = "system:kube-scheduler"

// startupGrace is how long StartScheduler watches the new process: a
// scheduler that cannot start (a bad flag or configuration) exits within
// it, and that becomes an error here rather than Pods that stay Pending.
const startupGrace = time.Second

// stopGrace is how long Stop lets kube-scheduler end on SIGTERM before it
// is killed.
const stopGrace = 10 * time.Second

// process is a child process that runs until Stop, its output in a file.
type process struct {
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{} // closed when the process has ended
	err  error         // how it ended, once done is closed
}

// StartScheduler runs kube-scheduler (from the assets folder) against the
// control plane, until Stop. It binds the Pods of every scheduler profile
// (default-scheduler) to registered Nodes; nothing runs them, as no kubelet
// exists here. It serves no port and elects no leader (one scheduler only),
// and logs to Dir/kube-scheduler.log.
func (cp *ControlPlane) StartScheduler(assets string) error {
	if cp.scheduler != nil {
		return errors.New("kube-scheduler is already started")
	}
	config, err := cp.writeSchedulerConfig()
	if err != nil {
		return err
	}
	p, err := startProcess(filepath.Join(cp.Dir, "kube-scheduler.log"), filepath.Join(assets, "kube-scheduler"), schedulerArgs(config)...)
	if err != nil {
		return fmt.Errorf("start kube-scheduler: %w", err)
	}
	select {
	case <-p.done:
		p.stop()
		return fmt.Errorf("kube-scheduler ended at start (%w): %s", p.err, tail(p.log.Name()))
	case <-time.After(startupGrace):
	}
	cp.scheduler = p
	return nil
}

// schedulerArgs are kube-scheduler's flags: the configuration file (which
// names the kubeconfig and turns leader election off), and --secure-port=0,
// which serves neither healthz nor metrics: nothing here reads them, and a
// fixed port (10259 by default) would collide between two control planes.
func schedulerArgs(config string) []string {
	return []string{"--config=" + config, "--secure-port=0", "--v=2"}
}

// writeSchedulerConfig writes kube-scheduler's kubeconfig, with a client
// certificate of its own user, and its KubeSchedulerConfiguration, and
// returns the latter's path. The configuration file is used, not the flags
// --kubeconfig and --leader-elect, because --kubeconfig is deprecated.
func (cp *ControlPlane) writeSchedulerConfig() (string, error) {
	user, err := cp.env.AddUser(envtest.User{Name: schedulerUser}, nil)
	if err != nil {
		return "", fmt.Errorf("add user %s: %w", schedulerUser, err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return "", fmt.Errorf("kubeconfig of %s: %w", schedulerUser, err)
	}
	kubeconfigPath := filepath.Join(cp.Dir, "kube-scheduler.kubeconfig")
	if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
		return "", err
	}
	// JSON is YAML, and it quotes the path whatever it holds.
	config, err := json.Marshal(map[string]any{
		"apiVersion":       "kubescheduler.config.k8s.io/v1",
		"kind":             "KubeSchedulerConfiguration",
		"clientConnection": map[string]any{"kubeconfig": kubeconfigPath},
		"leaderElection":   map[string]any{"leaderElect": false},
	})
	if err != nil {
		return "", err
	}
	path := filepath.Join(cp.Dir, "kube-scheduler.yaml")
	return path, os.WriteFile(path, config, 0o600)
}

// startProcess starts name with args, its stdout and stderr in logPath
// (truncated). Like envtest's processes it gets a process group of its own,
// so a Ctrl-C at the terminal reaches the program that started it, which
// stops it in order, rather than the process directly.
func startProcess(logPath, name string, args ...string) (*process, error) {
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return nil, err
	}
	p := &process{cmd: cmd, log: log, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// stop ends the process with SIGTERM, or SIGKILL after stopGrace, and waits
// for it. A process that has already ended is left as it is.
func (p *process) stop() {
	defer func() { _ = p.log.Close() }()
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(stopGrace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// tail returns the last lines of a log file, for an error message.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-5):], "\n")
}
