package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/term"
)

// openPTY opens a pseudo-terminal: the side a program writes to, and the
// side that reads what it wrote.
func openPTY(t *testing.T) (tty, reader *os.File) {
	t.Helper()
	// Non-blocking, so that reads honour a deadline.
	fd, err := syscall.Open("/dev/ptmx", syscall.O_RDWR|syscall.O_NOCTTY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("open /dev/ptmx: %v", err)
	}
	unlock, n := int32(0), uint32(0)
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		t.Fatalf("unlock pty: %v", e)
	}
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); e != 0 {
		t.Fatalf("pty number: %v", e)
	}
	master := os.NewFile(uintptr(fd), "/dev/ptmx")
	t.Cleanup(func() { _ = master.Close() })
	slave, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open pty: %v", err)
	}
	t.Cleanup(func() { _ = slave.Close() })
	return slave, master
}

// outputFor asks the file itself whether it is a terminal.
func TestOutputFor(t *testing.T) {
	hostile := "\x1b]52;c;aGk=\x07\x1b[2J\u009b\u202e"
	escaped := `\x1b]52;c;aGk=\a\x1b[2J\u009b\u202e`

	// Written in two pieces, the second the last byte of U+202E.
	tty, reader := openPTY(t)
	out := outputFor(tty)
	for _, piece := range []string{hostile[:len(hostile)-1], hostile[len(hostile)-1:]} {
		if _, err := io.WriteString(out, piece); err != nil {
			t.Fatal(err)
		}
	}
	if err := reader.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	var got []byte
	buf := make([]byte, 4096)
	for len(got) < len(escaped) {
		n, err := reader.Read(buf)
		if err != nil {
			t.Fatalf("read %q: %v", got, err)
		}
		got = append(got, buf[:n]...)
	}
	if d := cmp.Diff(escaped, string(got)); d != "" {
		t.Errorf("on a terminal: %s", d)
	}

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close() }()
	if _, err := io.WriteString(outputFor(w), hostile); err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
	piped, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(hostile, string(piped)); d != "" {
		t.Errorf("to a pipe: %s", d)
	}
}

// exec -t asks stdin's file descriptor whether it is a terminal: on a
// pseudo-terminal it gets as far as connecting, with the terminal put back
// as it was.
func TestExecOnATerminal(t *testing.T) {
	t.Parallel() // an exec tries a refused connection again for 30 s
	tty, _ := openPTY(t)
	before, err := term.GetState(int(tty.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	kc := kubeconfigNowhere(t)
	_, err = executeWith(tty, "--kubeconfig", kc, "exec", "box", "-t", "--", "sh")
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("want an error connecting to 127.0.0.1:1 (stdin a terminal), got %v", err)
	}
	after, err := term.GetState(int(tty.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	if *before != *after {
		t.Error("the terminal was left in raw mode")
	}
}
