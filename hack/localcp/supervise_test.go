package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// waiter is a command that says it is ready (a file), records each SIGTERM
// it gets in a file, and ends 0.5 s after the first: a second signal in
// that time is recorded too. The trap ends the sleep it waits for, so a
// signal that comes before the wait began (a loaded machine) ends it too.
func waiter(t *testing.T, dir, name string) *exec.Cmd {
	t.Helper()
	script := `trap 'echo TERM >> "$1.terms"; kill $pid 2>/dev/null' TERM
sleep 600 & pid=$!
touch "$1.ready"
wait $pid
sleep 0.5
exit 0`
	return exec.Command("sh", "-c", script, "sh", filepath.Join(dir, name))
}

func waitForFile(t *testing.T, path string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
	}
	t.Fatalf("no %s", path)
}

func terms(t *testing.T, dir, name string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name+".terms"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Count(string(b), "TERM")
}

func superviseInBackground(cmds []*exec.Cmd, signals chan os.Signal) chan int {
	code := make(chan int, 1)
	go func() { code <- supervise(cmds, signals) }()
	return code
}

func waitForCode(t *testing.T, code chan int) int {
	t.Helper()
	select {
	case c := <-code:
		return c
	case <-time.After(20 * time.Second):
		t.Fatal("supervise did not return")
		return 0
	}
}

// One manager exiting stops the others with one SIGTERM each, and its code
// is localcp's.
func TestOneCommandEndingStopsTheOthers(t *testing.T) {
	dir := t.TempDir()
	quitter := exec.Command("sh", "-c", `while [ ! -e "$1.ready" ] || [ ! -e "$2.ready" ]; do sleep 0.02; done; exit 3`, "sh",
		filepath.Join(dir, "a"), filepath.Join(dir, "b"))
	code := superviseInBackground([]*exec.Cmd{waiter(t, dir, "a"), quitter, waiter(t, dir, "b")}, make(chan os.Signal))
	if got := waitForCode(t, code); got != 3 {
		t.Fatalf("code %d, want the 3 of the command that ended first", got)
	}
	for _, name := range []string{"a", "b"} {
		if got := terms(t, dir, name); got != 1 {
			t.Errorf("%s got %d SIGTERMs, want 1", name, got)
		}
	}
}

// A signal to localcp reaches every command once, not again when the
// first of them ends.
func TestASignalReachesEveryCommandOnce(t *testing.T) {
	dir := t.TempDir()
	signals := make(chan os.Signal, 1)
	code := superviseInBackground([]*exec.Cmd{waiter(t, dir, "a"), waiter(t, dir, "b")}, signals)
	waitForFile(t, filepath.Join(dir, "a.ready"))
	waitForFile(t, filepath.Join(dir, "b.ready"))
	signals <- syscall.SIGTERM
	if got := waitForCode(t, code); got != 0 {
		t.Fatalf("code %d, want 0", got)
	}
	for _, name := range []string{"a", "b"} {
		if got := terms(t, dir, name); got != 1 {
			t.Errorf("%s got %d SIGTERMs, want 1", name, got)
		}
	}
}

// A command that cannot start stops those already started; the code is 1.
func TestACommandThatCannotStartStopsTheOthers(t *testing.T) {
	first := exec.Command("sleep", "600")
	code := superviseInBackground([]*exec.Cmd{first, exec.Command(filepath.Join(t.TempDir(), "missing"))}, make(chan os.Signal))
	if got := waitForCode(t, code); got != 1 {
		t.Fatalf("code %d, want 1", got)
	}
	if first.ProcessState == nil {
		t.Fatal("the started command was not waited for")
	}
}
