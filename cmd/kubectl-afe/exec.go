package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"path"
	"syscall"

	"golang.org/x/term"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// accessURL is the URL of a subresource of the access API, such as
// sandboxes/NAME/exec: the API the manager serves (package access) and the
// plugin reaches through the Kubernetes API server.
func accessURL(cfg *rest.Config, ns, resource, name, subresource string) (*url.URL, error) {
	base, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return nil, err
	}
	u := *base
	u.Path = path.Join(base.Path, "/apis", afev1.AccessGroup, afev1.AccessVersion, "namespaces", ns, resource, name, subresource)
	return &u, nil
}

// execStreams are where an exec's input comes from and its output goes.
type execStreams struct {
	stdin          *os.File
	stdout, stderr io.Writer
	// terminal is stdout as it is, for a command on a terminal.
	terminal io.Writer
}

// execCommand runs kubectl afe exec SANDBOX [-i] [-t] -- CMD [ARG...].
func execCommand(cfg *rest.Config, ns string, args []string, streams execStreams) error {
	fs := newFlagSet("exec", streams.stderr)
	stdin := fs.Bool("i", false, "Pass stdin to the command.")
	tty := fs.Bool("t", false, "Run the command on a terminal (stdin must be one).")
	fs.BoolVar(stdin, "stdin", false, "Same as -i.")
	fs.BoolVar(tty, "tty", false, "Same as -t.")
	if len(args) == 0 {
		return errors.New("exec needs a SANDBOX")
	}
	sandbox := args[0]
	if err := fs.Parse(splitShortFlags(args[1:])); err != nil {
		return exitError{2}
	}
	command := fs.Args()
	if len(command) > 0 && command[0] == "--" {
		command = command[1:]
	}
	if len(command) == 0 {
		return errors.New("exec needs a command after --")
	}
	if *tty && !term.IsTerminal(int(streams.stdin.Fd())) {
		return errors.New("-t needs stdin to be a terminal")
	}
	return streamExec(cfg, ns, sandbox, command, *stdin, *tty, streams)
}

// splitShortFlags spells -it and -ti as -i -t, as kubectl exec takes them,
// before the command.
func splitShortFlags(args []string) []string {
	var out []string
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		if a == "-it" || a == "-ti" {
			out = append(out, "-i", "-t")
			continue
		}
		out = append(out, a)
	}
	return out
}

// streamExec runs the command in the sandbox through the access API, with
// client-go's remotecommand executor (SPDY), as kubectl exec does, and
// ends with the command's exit code. With a terminal, the local one is put
// in raw mode and its size follows the window's; what the command prints
// then reaches the terminal unescaped, as with docker exec -it or ssh.
func streamExec(cfg *rest.Config, ns, sandbox string, command []string, stdin, tty bool, streams execStreams) error {
	u, err := accessURL(cfg, ns, "sandboxes", sandbox, "exec")
	if err != nil {
		return err
	}
	q := url.Values{"command": command, "stdout": {"true"}}
	opts := remotecommand.StreamOptions{Stdout: streams.stdout, Tty: tty}
	if stdin {
		q.Set("stdin", "true")
		opts.Stdin = streams.stdin
	}
	if tty {
		q.Set("tty", "true")
		opts.Stdout = streams.terminal
	} else {
		q.Set("stderr", "true")
		opts.Stderr = streams.stderr
	}
	u.RawQuery = q.Encode()
	executor, err := remotecommand.NewSPDYExecutor(cfg, "POST", u)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if tty {
		fd := int(streams.stdin.Fd())
		state, err := term.MakeRaw(fd)
		if err != nil {
			return fmt.Errorf("terminal: %w", err)
		}
		defer func() { _ = term.Restore(fd, state) }()
		opts.TerminalSizeQueue = newSizeQueue(ctx, fd)
	}
	err = executor.StreamWithContext(ctx, opts)
	var exit utilexec.CodeExitError
	if errors.As(err, &exit) {
		return exitError{exitCodeOf(int32(exit.Code))}
	}
	return err
}

// sizeQueue reports the terminal's size at start and after each SIGWINCH.
type sizeQueue struct {
	fd    int
	sizes chan remotecommand.TerminalSize
}

func newSizeQueue(ctx context.Context, fd int) *sizeQueue {
	q := &sizeQueue{fd: fd, sizes: make(chan remotecommand.TerminalSize, 1)}
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	q.push()
	go func() {
		defer signal.Stop(winch)
		for {
			select {
			case <-ctx.Done():
				close(q.sizes)
				return
			case <-winch:
				q.push()
			}
		}
	}()
	return q
}

// push queues the current size, replacing one not yet sent.
func (q *sizeQueue) push() {
	w, h, err := term.GetSize(q.fd)
	if err != nil {
		return
	}
	size := remotecommand.TerminalSize{Width: uint16(w), Height: uint16(h)}
	select {
	case <-q.sizes:
	default:
	}
	q.sizes <- size
}

// Next is the next size, or nil once the exec has ended.
func (q *sizeQueue) Next() *remotecommand.TerminalSize {
	size, ok := <-q.sizes
	if !ok {
		return nil
	}
	return &size
}
