package docker

import (
	"context"
	"strings"
	"testing"
	"time"
)

// follow collects the lines of a container's stdout from since until the
// container stops.
func follow(t *testing.T, id string, since time.Time) []LogLine {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var lines []LogLine
	if err := engine.FollowLogs(ctx, id, since, func(l LogLine) error {
		lines = append(lines, l)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return lines
}

// FollowLogs hands on stdout only, line by line with the engine's
// timestamps, a long line cut at MaxLogLine (the rest skipped); it follows what comes after
// it started, ends when the container stops, and from a line's timestamp
// starts again at that line.
func TestFollowLogs(t *testing.T) {
	labels := testLabels(t)
	name := uniqueName()
	// stderr lines between the stdout ones; a line of 100 KiB; then a wait
	// so that the last lines come while the log is followed.
	script := `echo one; echo hidden >&2; echo two; head -c 102400 /dev/zero | tr '\0' x; echo; sleep 2; echo three; echo 'four five'`
	c, err := engine.RunContainer(context.Background(), ContainerSpec{
		Name: name, Image: testImage, Labels: labels, Network: "none", User: "1000:1000",
		Command: []string{"sh", "-c", script},
	})
	if err != nil {
		t.Fatal(err)
	}
	lines := follow(t, c.ID, time.Time{})
	var texts []string
	for _, l := range lines {
		texts = append(texts, l.Text)
	}
	if len(texts) != 5 || texts[0] != "one" || texts[1] != "two" || texts[len(texts)-2] != "three" || texts[len(texts)-1] != "four five" {
		t.Fatalf("lines %q", short(texts))
	}
	for i, l := range lines {
		if len(l.Text) > MaxLogLine || strings.Contains(l.Text, "hidden") {
			t.Fatalf("line %d: %d bytes %q", i, len(l.Text), short([]string{l.Text}))
		}
		if i > 0 && l.Time.Before(lines[i-1].Time) {
			t.Fatalf("line %d's time %s before the one before it (%s)", i, l.Time, lines[i-1].Time)
		}
	}
	// The engine keeps a line past 16 KiB in pieces and gives them back
	// as one line, the timestamp of each later piece inside it: one line
	// here, cut at the bound.
	if x := texts[2]; len(x) < MaxLogLine-64 || !strings.HasPrefix(x, strings.Repeat("x", 16000)) {
		t.Fatalf("the long line came back as %d bytes: %q", len(x), short([]string{x}))
	}
	again := follow(t, c.ID, lines[1].Time)
	if len(again) != len(lines)-1 || again[0].Text != "two" || !again[0].Time.Equal(lines[1].Time) {
		t.Fatalf("from the second line's time: %d lines, first %q", len(again), short([]string{again[0].Text}))
	}
}

func short(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		if len(s) > 40 {
			s = s[:40] + "..."
		}
		out[i] = s
	}
	return out
}
