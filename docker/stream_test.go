package docker

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// An interactive command gets its input, its output reaches the writers
// as it ends, on two streams or all on a terminal, and its
// exit code comes back; ending the context ends the stream.
func TestExecStream(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := uniqueName()
	if _, err := engine.RunContainer(ctx, ContainerSpec{
		Name: name, Image: testImage, Labels: testLabels(t), Network: "none", Command: []string{"sleep", "600"},
	}); err != nil {
		t.Fatal(err)
	}

	var stdout, stderr bytes.Buffer
	code, err := engine.ExecStream(ctx, name, StreamSpec{
		Cmd:   []string{"sh", "-c", "cat; echo oops >&2; exit 3"},
		Stdin: strings.NewReader("hello\n"), Stdout: &stdout, Stderr: &stderr,
	})
	if err != nil || code != 3 || stdout.String() != "hello\n" || stderr.String() != "oops\n" {
		t.Fatalf("two streams: code %d, err %v, stdout %q, stderr %q; want 3, nil, \"hello\\n\", \"oops\\n\"", code, err, stdout.String(), stderr.String())
	}

	stdout.Reset()
	code, err = engine.ExecStream(ctx, name, StreamSpec{
		Cmd: []string{"sh", "-c", "tty; echo oops >&2"}, TTY: true, Size: &TerminalSize{Width: 101, Height: 33}, Stdout: &stdout,
	})
	if out := stdout.String(); err != nil || code != 0 || !strings.HasPrefix(out, "/dev/pts/") || !strings.Contains(out, "oops") {
		t.Fatalf("a terminal: code %d, err %v, output %q; want 0, nil, a terminal's name and the error output", code, err, out)
	}

	short, stop := context.WithTimeout(ctx, time.Second)
	defer stop()
	start := time.Now()
	code, err = engine.ExecStream(short, name, StreamSpec{Cmd: []string{"sleep", "30"}})
	if !errors.Is(err, context.DeadlineExceeded) || code != -1 || time.Since(start) > 20*time.Second {
		t.Fatalf("a context ended: code %d, err %v after %s; want -1 and its deadline, at once", code, err, time.Since(start))
	}
}
