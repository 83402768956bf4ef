package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/tools/remotecommand"

	"afe.dev/sandbox/client"
)

// newExecCommand is kubectl afe exec SANDBOX [-i] [-t] -- COMMAND [ARG...],
// its flags anywhere before "--" (kubectl exec -i POD -- cat).
func newExecCommand(newClient clientFunc, streams genericiooptions.IOStreams) *cobra.Command {
	var stdin, tty bool
	cmd := &cobra.Command{
		Use:               "exec SANDBOX [-i] [-t] -- COMMAND [ARG...]",
		Short:             "Execute a command in the sandbox through the access API; exit with its exit code",
		ValidArgsFunction: completeFirst(newClient, "Sandbox"),
		RunE: func(cmd *cobra.Command, args []string) error {
			sandbox, command, err := sandboxAndCommand(cmd, args)
			if err != nil {
				return err
			}
			if len(command) == 0 {
				return errors.New("exec needs a command after --")
			}
			if _, terminal := terminalOf(streams.In); tty && !terminal {
				return errors.New("-t needs stdin to be a terminal")
			}
			return withClient(newClient, func(c *client.Client) error {
				return streamExec(c, sandbox, command, stdin, tty, streams)
			})
		},
	}
	cmd.Flags().BoolVarP(&stdin, "stdin", "i", false, "Pass stdin to the command.")
	cmd.Flags().BoolVarP(&tty, "tty", "t", false, "Run the command on a terminal (stdin must be one).")
	return cmd
}

// streamExec runs the command in the sandbox through the access API
// (client.Exec, as kubectl exec does), and ends with the command's exit
// code. With a terminal (stdin is one), the local one is put in raw mode
// and its size follows the window's; what the command prints then reaches
// the terminal unescaped, as with docker exec -it or ssh.
func streamExec(c *client.Client, sandbox string, command []string, stdin, tty bool, streams genericiooptions.IOStreams) error {
	o := client.ExecOptions{Command: command, Stdout: streams.Out, Stderr: streams.ErrOut, TTY: tty}
	if stdin {
		o.Stdin = streams.In
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if tty {
		o.Stdout, o.Stderr = unescaped(streams.Out), nil
		fd, terminal := terminalOf(streams.In)
		if !terminal {
			return errors.New("a terminal needs stdin to be one")
		}
		state, err := term.MakeRaw(fd)
		if err != nil {
			return fmt.Errorf("terminal: %w", err)
		}
		defer func() { _ = term.Restore(fd, state) }()
		o.Sizes = newSizeQueue(ctx, fd)
	}
	code, err := c.Exec(ctx, sandbox, o)
	if err != nil {
		return err
	}
	if code != 0 {
		return exitError{exitCodeOf(int32(code))}
	}
	return nil
}

// terminalOf is the file descriptor of r, and whether it is a terminal
// (kubectl's term.TTY asks the same of its In).
func terminalOf(r io.Reader) (int, bool) {
	f, ok := r.(interface{ Fd() uintptr })
	if !ok {
		return 0, false
	}
	fd := int(f.Fd())
	return fd, term.IsTerminal(fd)
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
