package docker

import (
	"context"
	"errors"
	"fmt"
	"io"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"
)

// ExecSpec is a command to run in a running container.
type ExecSpec struct {
	Cmd        []string
	User       string
	WorkingDir string
	Env        []string
	// Stdout and Stderr receive the command's output; nil discards it.
	Stdout io.Writer
	Stderr io.Writer
}

// Exec runs a command in the container and returns its exit code once its
// output ends. Ending ctx stops waiting at once, even while a process the
// command started holds its output open, but does not stop the command: the
// engine has no way to kill an exec, so callers that need a deadline must
// arrange the kill themselves.
func (c *Client) Exec(ctx context.Context, containerName string, spec ExecSpec) (int, error) {
	c.count("container_exec_create")
	created, err := c.api.ContainerExecCreate(ctx, containerName, container.ExecOptions{
		Cmd:          spec.Cmd,
		User:         spec.User,
		WorkingDir:   spec.WorkingDir,
		Env:          spec.Env,
		AttachStdout: true,
		AttachStderr: true,
	})
	if err != nil {
		return -1, wrap(err, "exec in "+containerName)
	}
	c.count("container_exec_attach")
	attach, err := c.api.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{})
	if err != nil {
		return -1, wrap(err, "attach to exec in "+containerName)
	}
	defer attach.Close()
	stdout, stderr := orDiscard(spec.Stdout), orDiscard(spec.Stderr)
	copied := make(chan error, 1)
	go func() {
		_, err := stdcopy.StdCopy(stdout, stderr, attach.Reader)
		copied <- err
	}()
	select {
	case <-ctx.Done():
		// Abandoned (a process may hold the stream open for ever): the
		// stream is closed, and nothing is written to Stdout or Stderr
		// once Exec has returned.
		_ = attach.CloseWrite()
		attach.Close()
		if err := <-copied; err != nil && !errors.Is(err, io.EOF) {
			// A read cut short by the close: expected here.
			return -1, errors.Join(ctx.Err(), err)
		}
		return -1, ctx.Err()
	case err := <-copied:
		if err != nil && !errors.Is(err, io.EOF) {
			return -1, fmt.Errorf("read exec output: %w", err)
		}
	}
	// The stream ends a little before the engine records the exit code.
	return c.execExitCode(ctx, created.ID, containerName)
}

func errNotFoundf(format string, args ...any) error {
	return cerrdefs.ErrNotFound.WithMessage(fmt.Sprintf(format, args...))
}
