package telemetry

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestExecutionsDuring(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 6, 0, 0, 0, time.UTC)
	s := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Second) }
	e := &Executions{}
	e.Start("uid", "Run/a", s(0))(s(10))
	endB := e.Start("uid", "Run/b", s(5))
	e.Start("uid", "exec/x", s(20))
	e.Start("other", "Run/c", s(0))
	endB(s(30))
	tests := map[string]struct {
		from, to time.Time
		want     []string
	}{
		"before any":                      {s(-5), s(-4), nil},
		"one":                             {s(1), s(2), []string{"Run/a"}},
		"two at once":                     {s(6), s(7), []string{"Run/a", "Run/b"}},
		"a request that spans an end":     {s(9), s(12), []string{"Run/a", "Run/b"}},
		"an ended one and a running one":  {s(25), s(26), []string{"Run/b", "exec/x"}},
		"the running one only":            {s(40), s(41), []string{"exec/x"}},
		"within the clocks' slack of end": {s(10).Add(3 * time.Millisecond), s(10).Add(4 * time.Millisecond), []string{"Run/a", "Run/b"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, e.During("uid", tc.from, tc.to)); diff != "" {
				t.Fatalf("-want +got:\n%s", diff)
			}
		})
	}
	var none *Executions
	none.Start("uid", "Run/a", s(0))(s(1))
	if got := none.During("uid", s(0), s(1)); got != nil {
		t.Fatalf("a nil Executions names %v", got)
	}
}

// The ended executions kept are bounded per sandbox; the running ones all
// stay.
func TestExecutionsAreBounded(t *testing.T) {
	t0 := time.Now()
	e := &Executions{}
	running := e.Start("uid", "Run/long", t0)
	for i := range 1000 {
		e.Start("uid", fmt.Sprintf("exec/%d", i), t0)(t0)
	}
	if n := len(e.m["uid"]); n != maxEnded+1 {
		t.Fatalf("%d executions kept, want %d", n, maxEnded+1)
	}
	// Once it ends, the oldest ended one goes: the long Run.
	running(t0)
	got := e.During("uid", t0, t0)
	if len(got) != maxEnded || slices.Contains(got, "Run/long") || !slices.Contains(got, "exec/999") || slices.Contains(got, "exec/935") {
		t.Fatalf("kept %d: %v", len(got), got)
	}
}
