package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
)

// supervise starts the commands and waits until all have ended: it passes
// SIGINT and SIGTERM from signals on to every one still running, and when
// one ends first (of itself or of a signal) it stops the others with
// SIGTERM, unless they already have a signal. It returns the exit code of
// the one that ended first; 1 if a command could not be started.
func supervise(cmds []*exec.Cmd, signals <-chan os.Signal) int {
	type ended struct {
		i   int
		err error
	}
	done := make(chan ended, len(cmds))
	running := map[int]*exec.Cmd{}
	signalled := map[int]bool{}
	code, first := 1, true
	for i, cmd := range cmds {
		if err := cmd.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "localcp:", err)
			first = false // the others are stopped below; 1 is the code
			break
		}
		running[i] = cmd
		go func() {
			err := cmd.Wait()
			flush(cmd)
			done <- ended{i, err}
		}()
	}
	stopOthers := func() {
		for i, cmd := range running {
			if !signalled[i] {
				signalled[i] = true
				_ = cmd.Process.Signal(syscall.SIGTERM)
			}
		}
	}
	if !first {
		stopOthers()
	}
	for len(running) > 0 {
		select {
		case sig := <-signals:
			for i, cmd := range running {
				signalled[i] = true
				_ = cmd.Process.Signal(sig)
			}
		case e := <-done:
			delete(running, e.i)
			if first {
				first = false
				code = exitCode(e.err)
				stopOthers()
			}
		}
	}
	return code
}

// exitCode is the code a command ended with: -1 when a signal ended it.
func exitCode(err error) int {
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode()
	}
	if err != nil {
		return 1
	}
	return 0
}

// prefixWriter writes each line given to it to out, after a prefix that
// says which node's manager wrote it. Lines are written whole, under a lock
// shared by every prefixWriter, so those of two managers never mix.
type prefixWriter struct {
	out     io.Writer
	prefix  []byte
	partial []byte // the start of a line whose end has not come yet
}

var outputLock sync.Mutex

func newPrefixWriter(out io.Writer, node string) *prefixWriter {
	return &prefixWriter{out: out, prefix: []byte("[" + node + "] ")}
}

// Write writes the complete lines of p, with those begun before, and keeps
// the rest for the next Write or Flush.
func (w *prefixWriter) Write(p []byte) (int, error) {
	w.partial = append(w.partial, p...)
	var lines []byte
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		lines = append(append(lines, w.prefix...), w.partial[:i+1]...)
		w.partial = w.partial[i+1:]
	}
	if len(lines) > 0 {
		outputLock.Lock()
		defer outputLock.Unlock()
		if _, err := w.out.Write(lines); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// Flush writes a last line that has no newline.
func (w *prefixWriter) Flush() {
	if len(w.partial) > 0 {
		_, _ = w.Write([]byte("\n"))
	}
}

// flush writes what the command's prefixWriters still hold, once it has
// ended.
func flush(cmd *exec.Cmd) {
	for _, w := range []io.Writer{cmd.Stdout, cmd.Stderr} {
		if pw, ok := w.(*prefixWriter); ok {
			pw.Flush()
		}
	}
}
