package main

import (
	"strings"
	"testing"
	"time"

	"afe.dev/sandbox/internal/telemetry"
)

func TestWriteRecords(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	recs := []telemetry.Record{
		{Sandbox: "box", Seq: 1, Source: telemetry.SourceRun, Started: t0, Ended: t0.Add(1500 * time.Millisecond), ExitCode: 0,
			User: "1000:2000000001", Run: "build", Attempt: 2, StartedBy: "Run ns/build", Command: []string{"/bin/sh", "-c", "make test"}},
		{Sandbox: "box", Seq: 2, Source: telemetry.SourceEngine, Started: t0, Ended: t0, ExitCode: 4,
			Command: []string{"printf", "a\nb\x1b[2J", ""}},
	}
	var out strings.Builder
	if err := writeRecords(&out, recs, true); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("a record is one line:\n%s", out.String())
	}
	for _, want := range []string{"box", "1", "Run", "2026-12-01T10:00:00Z", "1.5s", "1000:2000000001", "build#2", `/bin/sh -c "make test"`} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("line %q lacks %q", lines[1], want)
		}
	}
	if !strings.Contains(lines[2], `printf "a\nb\x1b[2J" ""`) || strings.ContainsRune(lines[2], 0x1b) {
		t.Errorf("a command with controls is quoted: %q", lines[2])
	}
}

func TestWriteEgress(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	recs := []telemetry.EgressRecord{
		{Sandbox: "box", Seq: 3, Time: t0, Decision: "Allowed", Method: "CONNECT", Host: "pypi.org", Port: 443, BytesUp: 517, BytesDown: 6000,
			Running: []string{"Run/build"}},
		{Sandbox: "box", Seq: 4, Time: t0, Decision: "Denied", Reason: "host", Method: "GET", Host: "evil.test\n5\tforged\x1b[2J", Port: 80},
	}
	var out strings.Builder
	if err := writeEgress(&out, recs, true); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("a record is one line:\n%s", out.String())
	}
	for _, want := range []string{"box", "3", "Allowed", "CONNECT", "pypi.org", "443", "517", "6000", "Run/build"} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("line %q lacks %q", lines[1], want)
		}
	}
	if !strings.Contains(lines[2], `"evil.test\n5\tforged\x1b[2J"`) || strings.ContainsRune(lines[2], 0x1b) || !strings.Contains(lines[2], "host") {
		t.Errorf("a host with controls is quoted: %q", lines[2])
	}
}
