package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"
)

// TerminalSize is the size of a terminal, in characters.
type TerminalSize struct {
	Width, Height uint16
}

// StreamSpec is an interactive command: its input comes from Stdin, its
// output goes to Stdout and Stderr as it is written, and with TTY it runs on
// a terminal (whose output is all on Stdout) that Resize resizes.
type StreamSpec struct {
	Cmd        []string
	User       string
	WorkingDir string
	Env        []string
	TTY        bool
	// Stdin is copied to the command until it ends, which closes the
	// command's input; nil gives the command no input.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Size is the terminal's size at start (TTY only), when known.
	Size *TerminalSize
	// Resize receives the terminal's sizes (TTY only); nil when it never
	// changes.
	Resize <-chan TerminalSize
}

// ExecStream runs an interactive command in the running container and
// returns its exit code once its output ends. Ending ctx closes the streams
// and returns ctx's error; as with Exec, the engine cannot kill the command
// (a terminal's command gets a hangup when its terminal closes).
func (c *Client) ExecStream(ctx context.Context, containerID string, spec StreamSpec) (int, error) {
	c.count("container_exec_create")
	created, err := c.api.ContainerExecCreate(ctx, containerID, streamOptions(spec))
	if err != nil {
		return -1, fmt.Errorf("%w: %w", ErrExecNotCreated, wrap(err, "exec in "+containerID))
	}
	c.own.Store(created.ID, struct{}{})
	c.count("container_exec_attach")
	attach, err := c.api.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{Tty: spec.TTY})
	if err != nil {
		return -1, wrap(err, "attach to exec in "+containerID)
	}
	defer attach.Close()
	if spec.Stdin != nil {
		go func() {
			_, _ = io.Copy(attach.Conn, spec.Stdin)
			_ = attach.CloseWrite()
		}()
	}
	c.resizeTerminal(ctx, created.ID, spec)
	if err := copyOutput(ctx, &attach, spec); err != nil {
		return -1, err
	}
	return c.execExitCode(ctx, created.ID, containerID)
}

// streamOptions are the engine's options of the exec of spec.
func streamOptions(spec StreamSpec) container.ExecOptions {
	opts := container.ExecOptions{
		Cmd:          spec.Cmd,
		User:         spec.User,
		WorkingDir:   spec.WorkingDir,
		Env:          spec.Env,
		Tty:          spec.TTY,
		AttachStdin:  spec.Stdin != nil,
		AttachStdout: true,
		AttachStderr: true,
	}
	if spec.TTY && spec.Size != nil {
		// Engines from API 1.42 start the terminal at that size; older
		// ones get the resize below, just after the command started.
		opts.ConsoleSize = &[2]uint{uint(spec.Size.Height), uint(spec.Size.Width)}
	}
	return opts
}

// resizeTerminal gives the exec's terminal (TTY only) its size at start,
// and then the sizes spec.Resize receives, until ctx ends.
func (c *Client) resizeTerminal(ctx context.Context, execID string, spec StreamSpec) {
	resize := func(size TerminalSize) {
		c.count("container_exec_resize")
		_ = c.api.ContainerExecResize(ctx, execID, container.ResizeOptions{Width: uint(size.Width), Height: uint(size.Height)})
	}
	var applied *TerminalSize
	if spec.TTY && spec.Size != nil {
		resize(*spec.Size)
		applied = spec.Size
	}
	if spec.TTY && spec.Resize != nil {
		go resizeEvery(ctx, spec.Resize, applied, ResizeInterval, resize)
	}
}

// copyOutput copies the exec's output to spec's writers until it ends.
// Ending ctx closes attach and returns ctx's error.
func copyOutput(ctx context.Context, attach *types.HijackedResponse, spec StreamSpec) error {
	stdout, stderr := orDiscard(spec.Stdout), orDiscard(spec.Stderr)
	copied := make(chan error, 1)
	go func() {
		var err error
		if spec.TTY {
			_, err = io.Copy(stdout, attach.Reader)
		} else {
			_, err = stdcopy.StdCopy(stdout, stderr, attach.Reader)
		}
		copied <- err
	}()
	select {
	case <-ctx.Done():
		attach.Close()
		if err := <-copied; err != nil && !errors.Is(err, io.EOF) {
			// A read cut short by the close: expected here.
			return errors.Join(ctx.Err(), err)
		}
		return ctx.Err()
	case err := <-copied:
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("read exec output: %w", err)
		}
	}
	return nil
}

// ResizeInterval is the least time between two resizes of an exec's
// terminal: a client sending sizes faster (each one an engine request
// otherwise) has the latest applied at that pace.
const ResizeInterval = 100 * time.Millisecond

// resizeEvery applies the sizes received, at most one every interval (the
// latest one), and none equal to the size applied before.
func resizeEvery(ctx context.Context, sizes <-chan TerminalSize, applied *TerminalSize, interval time.Duration, resize func(TerminalSize)) {
	var pending *TerminalSize
	var wait <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case size, ok := <-sizes:
			if !ok {
				return
			}
			pending = &size
		case <-wait:
			wait = nil
		}
		if pending == nil || wait != nil {
			continue
		}
		if applied == nil || *pending != *applied {
			resize(*pending)
			applied = pending
			wait = time.After(interval)
		}
		pending = nil
	}
}

// execExitCode waits for the engine to record the exit code of an exec
// whose output has ended (it does a little later).
func (c *Client) execExitCode(ctx context.Context, execID, containerName string) (int, error) {
	for i := 0; ; i++ {
		c.count("container_exec_inspect")
		info, err := c.api.ContainerExecInspect(ctx, execID)
		if err != nil {
			return -1, wrap(err, "inspect exec in "+containerName)
		}
		if !info.Running {
			return info.ExitCode, nil
		}
		select {
		case <-ctx.Done():
			return -1, ctx.Err()
		case <-time.After(time.Duration(min(i+1, 20)) * 5 * time.Millisecond):
		}
	}
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}
