package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"golang.org/x/term"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/sandboxspec"
)

// waitRun watches the Run until it ends.
func waitRun(ctx context.Context, c client.WithWatch, run *afev1.Run) error {
	for !run.Status.Phase.Terminal() {
		w, err := c.Watch(ctx, &afev1.RunList{}, client.InNamespace(run.Namespace),
			client.MatchingFields{"metadata.name": run.Name},
			&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: run.ResourceVersion}})
		if err != nil {
			return err
		}
		for ev := range w.ResultChan() {
			if r, ok := ev.Object.(*afev1.Run); ok {
				*run = *r
				if run.Status.Phase.Terminal() {
					break
				}
			}
		}
		w.Stop()
		// The watch ended or the Run did: read it as it is now.
		if err := c.Get(ctx, client.ObjectKeyFromObject(run), run); err != nil {
			return err
		}
	}
	return nil
}

// runCommand creates a Run, waits for its end and mirrors its outcome.
func runCommand(c client.WithWatch, ns string, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("run", stderr)
	timeout := fs.Int("timeout", 0, "Timeout in seconds (default: the sandbox's).")
	workdir := fs.String("workdir", "", "Working directory (default /workspace).")
	script := fs.String("script", "", "A shell script to run with /bin/sh -c instead of a command.")
	if len(args) == 0 {
		return fmt.Errorf("run needs a SANDBOX")
	}
	sandbox := args[0]
	if err := fs.Parse(args[1:]); err != nil {
		return exitError{2}
	}
	command := fs.Args()
	if len(command) > 0 && command[0] == "--" {
		command = command[1:]
	}
	if (len(command) == 0) == (*script == "") {
		return fmt.Errorf("give a command after -- or a --script, not both")
	}
	run := &afev1.Run{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: sandbox + "-run-"},
		Spec: afev1.RunSpec{
			SandboxRef: afev1.SandboxReference{Name: sandbox},
			Command:    command,
			Script:     *script,
			WorkingDir: *workdir,
		},
	}
	if *timeout > 0 {
		t := int32(*timeout)
		run.Spec.TimeoutSeconds = &t
	}
	ctx := context.Background()
	if err := c.Create(ctx, run); err != nil {
		return err
	}
	_, _ = fmt.Fprintf(stderr, "run/%s created\n", run.Name)
	if err := waitRun(ctx, c, run); err != nil {
		return err
	}
	printOutput(run, stdout, stderr)
	switch run.Status.Phase {
	case afev1.RunTimedOut:
		_, _ = fmt.Fprintf(stderr, "run/%s timed out and was killed\n", run.Name)
		return exitError{124}
	case afev1.RunFailed:
		if c := meta.FindStatusCondition(run.Status.Conditions, afev1.RunCompletedCondition); c != nil {
			_, _ = fmt.Fprintf(stderr, "run/%s failed: %s\n", run.Name, c.Message)
		}
		return exitError{125}
	}
	if run.Status.ExitCode != nil && *run.Status.ExitCode != 0 {
		return exitError{int(*run.Status.ExitCode)}
	}
	return nil
}

func printOutput(run *afev1.Run, stdout, stderr io.Writer) {
	if run.Status.OutputTruncated {
		_, _ = fmt.Fprintf(stderr, "(output truncated: the last %d bytes follow)\n", len(run.Status.Output))
	}
	_, _ = fmt.Fprint(stdout, run.Status.Output)
}

// logsCommand prints a Run's output.
func logsCommand(c client.Client, ns string, args []string, stdout, stderr io.Writer) error {
	if len(args) != 1 {
		return fmt.Errorf("logs needs exactly one RUN")
	}
	run := &afev1.Run{}
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: args[0]}, run); err != nil {
		return err
	}
	if !run.Status.Phase.Terminal() {
		_, _ = fmt.Fprintf(stderr, "run/%s is %s; its output is recorded when it ends\n", run.Name, run.Status.Phase)
	}
	printOutput(run, stdout, stderr)
	return nil
}

// shellCommand opens a shell (or runs a command) in the sandbox container,
// through the docker CLI, as the sandbox's user in /workspace. It is refused
// unless this machine reaches the sandbox's engine and finds that very
// container there.
func shellCommand(c client.Client, ns string, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("shell needs a SANDBOX")
	}
	sbx := &afev1.Sandbox{}
	ctx := context.Background()
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: args[0]}, sbx); err != nil {
		return err
	}
	if sbx.Status.ContainerName == "" || !meta.IsStatusConditionTrue(sbx.Status.Conditions, afev1.SandboxReadyCondition) {
		return fmt.Errorf("sandbox %s is not Ready", sbx.Name)
	}
	engine, err := docker.New("")
	if err != nil {
		return err
	}
	pingCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := engine.Ping(pingCtx); err != nil {
		return fmt.Errorf("refused: the sandbox's Docker engine is not reachable from here (DOCKER_HOST=%q): %w", os.Getenv("DOCKER_HOST"), err)
	}
	ct, err := engine.InspectContainer(pingCtx, sbx.Status.ContainerName)
	if err != nil || ct.Labels[afev1.LabelSandboxUID] != string(sbx.UID) {
		return fmt.Errorf("refused: container %s of sandbox %s is not on the Docker engine reached from here", sbx.Status.ContainerName, sbx.Name)
	}
	command := args[1:]
	if len(command) > 0 && command[0] == "--" {
		command = command[1:]
	}
	if len(command) == 0 {
		command = []string{"/bin/sh"}
	}
	dockerBin, err := exec.LookPath("docker")
	if err != nil {
		return errors.New("shell needs the docker CLI on PATH")
	}
	flags := "-i"
	if term.IsTerminal(int(os.Stdin.Fd())) {
		flags = "-it"
	}
	user, err := shellUser(ct)
	if err != nil {
		return err
	}
	argv := append([]string{"docker", "exec", flags, "--user", user, "--workdir", "/workspace", ct.ID}, command...)
	return syscall.Exec(dockerBin, argv, os.Environ())
}

// shellUser is the user a shell runs as: the container's own numeric
// uid:gid, never a bare uid, with which the engine would add the groups the
// image's /etc/group gives that user.
func shellUser(ct *docker.Container) (string, error) {
	if _, _, err := sandboxspec.ParseUser(ct.User); err != nil || !strings.Contains(ct.User, ":") {
		return "", fmt.Errorf("refused: container %s runs as %q, not a numeric uid:gid", ct.Name, ct.User)
	}
	return ct.User, nil
}
