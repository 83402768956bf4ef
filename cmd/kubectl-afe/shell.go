package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"golang.org/x/term"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/naming"
	"afe.dev/sandbox/internal/sandboxspec"
)

// shellCommand opens a shell (or runs a command) in the sandbox container,
// through the docker CLI, as the sandbox's user in /workspace. It is refused
// unless this machine reaches the sandbox's engine and finds there the
// container of that very Sandbox, made by the controller of that instance.
func shellCommand(c client.Client, ns, instance string, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("shell needs a SANDBOX")
	}
	sbx := &afev1.Sandbox{}
	ctx := context.Background()
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: args[0]}, sbx); err != nil {
		return err
	}
	// Status is a report: it may make the plugin refuse, never choose what
	// it acts on.
	if !meta.IsStatusConditionTrue(sbx.Status.Conditions, afev1.SandboxReadyCondition) {
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
	ct, err := shellTarget(pingCtx, engine, sbx, instance)
	if err != nil {
		return err
	}
	command := args[1:]
	if len(command) > 0 && command[0] == "--" {
		command = command[1:]
	}
	argv, err := shellArgv(sbx, ct.ID, command, term.IsTerminal(int(os.Stdin.Fd())))
	if err != nil {
		return err
	}
	dockerBin, err := exec.LookPath("docker")
	if err != nil {
		return errors.New("shell needs the docker CLI on PATH")
	}
	// From here the sandbox has the terminal, as with docker exec or ssh:
	// what it prints is not escaped.
	return syscall.Exec(dockerBin, argv, os.Environ())
}

// shellTarget finds the sandbox container of sbx on the engine. Its name is
// derived from the Sandbox's namespace and name, never read from status;
// the container found there must carry the Sandbox's UID, namespace and
// name, the sandbox role and the controller's instance, and be running. The
// caller acts on the returned container by its ID, so a container put in
// its place afterwards is not the one reached.
func shellTarget(ctx context.Context, engine docker.Engine, sbx *afev1.Sandbox, instance string) (*docker.Container, error) {
	if sbx.UID == "" {
		return nil, fmt.Errorf("refused: sandbox %s has no UID", sbx.Name)
	}
	name := naming.Container(naming.Key(sbx.Namespace, sbx.Name))
	ct, err := engine.InspectContainer(ctx, name)
	if errors.Is(err, docker.ErrNotFound) {
		return nil, fmt.Errorf("refused: container %s of sandbox %s is not on the Docker engine reached from here", name, sbx.Name)
	}
	if err != nil {
		return nil, fmt.Errorf("refused: %w", err)
	}
	want := map[string]string{
		afev1.LabelSandboxUID: string(sbx.UID),
		afev1.LabelNamespace:  sbx.Namespace,
		afev1.LabelSandbox:    sbx.Name,
		afev1.LabelRole:       afev1.RoleSandbox,
		afev1.LabelController: instance,
	}
	for _, k := range []string{afev1.LabelSandboxUID, afev1.LabelNamespace, afev1.LabelSandbox, afev1.LabelRole, afev1.LabelController} {
		if got, ok := ct.Labels[k]; !ok || got != want[k] {
			return nil, fmt.Errorf("refused: container %s is not the sandbox container of sandbox %s for controller instance %q (its label %s is %q, not %q; give the controller's instance with --instance)",
				name, sbx.Name, instance, k, got, want[k])
		}
	}
	if !ct.Running {
		return nil, fmt.Errorf("refused: container %s of sandbox %s is not running", name, sbx.Name)
	}
	return ct, nil
}

// shellArgv is the docker CLI's command line: exec in the container of that
// ID, as the sandbox's uid:gid (numeric, parsed from spec.user: a bare uid
// would run with the image's group for it, or root's), in /workspace.
func shellArgv(sbx *afev1.Sandbox, containerID string, command []string, tty bool) ([]string, error) {
	uid, gid, err := sandboxspec.ParseUser(sbx.Spec.User)
	if err != nil {
		return nil, fmt.Errorf("refused: sandbox %s: %w", sbx.Name, err)
	}
	if len(command) == 0 {
		command = []string{"/bin/sh"}
	}
	flags := "-i"
	if tty {
		flags = "-it"
	}
	argv := []string{"docker", "exec", flags, "--user", fmt.Sprintf("%d:%d", uid, gid), "--workdir", sandboxspec.WorkspacePath, containerID}
	return append(argv, command...), nil
}
