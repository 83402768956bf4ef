package docker

import (
	"context"
	"errors"
	goruntime "runtime"
	"strings"
	"testing"
	"time"
)

// Tell reaches a container's stdin and reads its answer on stderr, under
// every runtime: several times over (the attach ends, the stdin stays
// open), ignoring the lines that are not the answer, leaving nothing
// behind when output follows the answer, and a container that never
// answers makes Tell wait no longer than its context.
func TestTellWritesStdinAndReadsTheAnswer(t *testing.T) {
	forEachRuntime(t, func(t *testing.T, runtime string) {
		ctx := context.Background()
		// The shell reads its requests and answers each on stderr, after a
		// line that is not the answer, and writes a decoy on stdout.
		c, err := engine.RunContainer(ctx, ContainerSpec{
			Name: uniqueName(), Image: testImage, Labels: testLabels(t), Network: "none", User: "1000:1000",
			PidsLimit: 64, Runtime: runtime, OpenStdin: true,
			Command: []string{"sh", "-c", `while read -r n; do echo "answer $n" ; echo noise >&2; echo "answer $n" >&2; seq 2000 >&2; done`},
		})
		if err != nil {
			t.Fatal(err)
		}
		goroutines := goruntime.NumGoroutine()
		for _, n := range []string{"1", "2", "3"} {
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			started := time.Now()
			got, err := engine.Tell(ctx, c.ID, n, func(line string) bool { return strings.HasPrefix(line, "answer ") })
			cancel()
			if err != nil || got != "answer "+n {
				t.Fatalf("tell %s: %q, %v", n, got, err)
			}
			t.Logf("%s: answered in %s", runtime, time.Since(started))
		}
		// The copies of the output that followed each answer ended.
		for deadline := time.Now().Add(5 * time.Second); goruntime.NumGoroutine() > goroutines; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d goroutines after the tells, %d before", goruntime.NumGoroutine(), goroutines)
			}
		}
		if _, err := engine.Tell(ctx, c.ID, "a\nb", func(string) bool { return true }); err == nil {
			t.Fatal("a line with a newline was written")
		}
		wait, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err = engine.Tell(wait, c.ID, "4", func(line string) bool { return line == "never" })
		if !errors.Is(err, ErrNoAnswer) {
			t.Fatalf("no answer: %v", err)
		}
	})
}
