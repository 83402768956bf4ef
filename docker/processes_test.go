package docker

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseTop(t *testing.T) {
	titles := []string{"PID", "RGID", "EGID", "SGID", "STAT"}
	got, err := parseTop(titles, [][]string{{"968", "1000", "1000", "1000", "Ss"}, {"1054", "2000000123", "2000000123", "2000000123", "Z"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []Process{{PID: 968, RGID: 1000, EGID: 1000, SGID: 1000, State: "Ss"}, {PID: 1054, RGID: 2000000123, EGID: 2000000123, SGID: 2000000123, State: "Z"}}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatal(d)
	}
	if !got[1].Zombie() || got[0].Zombie() || !got[1].HasGroup(2000000123) || got[0].HasGroup(2000000123) {
		t.Fatalf("Zombie/HasGroup wrong: %+v", got)
	}
	for name, tc := range map[string]struct {
		titles []string
		rows   [][]string
	}{
		"missing column": {[]string{"PID", "RGID"}, nil},
		"short row":      {titles, [][]string{{"1", "2"}}},
		"not a number":   {titles, [][]string{{"x", "1", "1", "1", "S"}}},
	} {
		if _, err := parseTop(tc.titles, tc.rows); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestParseStatus(t *testing.T) {
	out := "Pid:\t1\nState:\tS (sleeping)\nGid:\t1000\t1000\t1000\t1000\n\n" +
		"Pid:\t7\nState:\tZ (zombie)\nGid:\t2000000123\t2000000123\t2000000123\t2000000123\n\n" +
		"\n" + // a process that ended while it was read
		"Pid:\t9\n\n" + // and one that ended half-way
		// The next pass: process 1 again, now a zombie, and a new one.
		"Pid:\t1\nState:\tZ (zombie)\nGid:\t1000\t1000\t1000\t1000\n\n" +
		"Pid:\t12\nState:\tR (running)\nGid:\t1000\t1000\t1000\t1000\n\n"
	got, err := parseStatus(out)
	if err != nil {
		t.Fatal(err)
	}
	want := []Process{{PID: 1, RGID: 1000, EGID: 1000, SGID: 1000, State: "Z"}, {PID: 7, RGID: 2000000123, EGID: 2000000123, SGID: 2000000123, State: "Z"},
		{PID: 12, RGID: 1000, EGID: 1000, SGID: 1000, State: "R"}}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatal(d)
	}
	for name, bad := range map[string]string{
		"pid not a number": "Pid:\tx\nState:\tS\nGid:\t1\t1\t1\t1\n",
		"short gid":        "Pid:\t1\nState:\tS\nGid:\t1\n",
		"gid not a number": "Pid:\t1\nState:\tS\nGid:\t1\tx\t1\t1\n",
		"two pids":         "Pid:\t1 2\nState:\tS\nGid:\t1\t1\t1\t1\n",
	} {
		if _, err := parseStatus(bad); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestListContext: the kernel's list is bounded by its caller's deadline,
// longer than kernelProcessesTimeout too (the sweep after a Run's end waits
// for a loaded host), and by kernelProcessesTimeout only when the caller
// gives none.
func TestListContext(t *testing.T) {
	for name, tc := range map[string]struct {
		timeout time.Duration // 0: no deadline
		want    time.Duration
	}{
		"no deadline":     {0, kernelProcessesTimeout},
		"a shorter grace": {3 * time.Second, 3 * time.Second},
		"a longer wait":   {time.Minute, time.Minute},
	} {
		ctx := context.Background()
		if tc.timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, tc.timeout)
			defer cancel()
		}
		lctx, cancel := listContext(ctx)
		deadline, ok := lctx.Deadline()
		cancel()
		if got := time.Until(deadline); !ok || got > tc.want || got < tc.want-time.Second {
			t.Errorf("%s: the list has %s (deadline %v), want %s", name, got.Round(time.Second), ok, tc.want)
		}
	}
}
