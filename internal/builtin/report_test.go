package builtin

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// hx is a SHA-1 object name made of one digit.
func hx(c byte) string { return strings.Repeat(string(c), 40) }

// feed writes out to r in small pieces, as a stream comes.
func feed(r interface{ Write([]byte) (int, error) }, out string) {
	for b := []byte(out); len(b) > 0; {
		n := min(7, len(b))
		_, _ = r.Write(b[:n])
		b = b[n:]
	}
}

func TestReport(t *testing.T) {
	a, b, base, integ := hx('a'), hx('b'), hx('0'), hx('9')
	tests := map[string]struct {
		lanes    []string
		out      string
		ci       *CI
		want     Outcome
		wantCode int
		failure  *Failure
		done     bool
	}{
		"merged and CI passed": {
			lanes: []string{"a", "b"},
			out: "afe-builtin committed a " + a + "\nafe-builtin unchanged b\nafe-builtin base " + base + "\n" +
				"afe-builtin merged a " + a + "\nafe-builtin merged b " + b + "\nafe-builtin integration " + integ + "\nafe-builtin done merged\n",
			ci:   &CI{ExitCode: 0, Output: "ok\n"},
			done: true,
			want: Outcome{Merged: true, Conflicts: []Conflict{}, CIPassed: true, CIOutput: "ok\n", CIExitCode: ptr(0),
				BaseCommit: base, IntegrationBranch: "integration", IntegrationCommit: integ,
				Lanes: []LaneCommit{{Lane: "a", Commit: a}, {Lane: "b", Commit: b}}},
			wantCode: 0,
		},
		"red CI, a lane without a worktree, SHA-256 names": {
			lanes: []string{"a", "b/c"},
			out: "afe-builtin committed b/c " + strings.Repeat("c", 64) + "\nafe-builtin base " + strings.Repeat("0", 64) + "\n" +
				"afe-builtin merged a " + strings.Repeat("a", 64) + "\nafe-builtin merged b/c " + strings.Repeat("c", 64) + "\n" +
				"afe-builtin integration " + strings.Repeat("9", 64) + "\nafe-builtin done merged\n",
			ci:   &CI{ExitCode: 2, Output: "FAIL\n"},
			done: true,
			want: Outcome{Merged: true, Conflicts: []Conflict{}, CIPassed: false, CIOutput: "FAIL\n", CIExitCode: ptr(2),
				BaseCommit: strings.Repeat("0", 64), IntegrationBranch: "integration", IntegrationCommit: strings.Repeat("9", 64),
				Lanes: []LaneCommit{{Lane: "a", Commit: strings.Repeat("a", 64)}, {Lane: "b/c", Commit: strings.Repeat("c", 64)}}},
			wantCode: 2,
		},
		"conflict with quoted and spaced paths": {
			lanes: []string{"a", "b", "c"},
			out: "afe-builtin base " + base + "\nafe-builtin merged a " + a + "\nafe-builtin conflict b " + b + "\n" +
				"afe-builtin file b src/main.go\nafe-builtin file b with space.txt\n" +
				"afe-builtin file b \"caf\\303\\251 \\\"q\\\".txt\"\n" +
				"afe-builtin integration " + integ + "\nafe-builtin done conflict\n",
			done: true,
			want: Outcome{Merged: false, Conflicts: []Conflict{{Lane: "b", Files: []string{"src/main.go", "with space.txt", "café \"q\".txt"}}},
				BaseCommit: base, IntegrationBranch: "integration", IntegrationCommit: integ, Lanes: []LaneCommit{{Lane: "a", Commit: a}}},
			wantCode: 1,
		},
		"conflict with more files than listed": {
			lanes: []string{"a"},
			out: "afe-builtin base " + base + "\nafe-builtin conflict a " + a + "\nafe-builtin file a x\nafe-builtin truncated a\n" +
				"afe-builtin integration " + base + "\nafe-builtin done conflict\n",
			done: true,
			want: Outcome{Merged: false, Conflicts: []Conflict{{Lane: "a", Files: []string{"x"}, FilesTruncated: true}},
				BaseCommit: base, IntegrationBranch: "integration", IntegrationCommit: base, Lanes: []LaneCommit{}},
			wantCode: 1,
		},
		"no git": {
			lanes:   []string{"a"},
			out:     "afe-builtin error git-not-found\n",
			failure: &Failure{afev1.GitNotFoundReason, "git is not installed in the sandbox image (no git on its PATH)"},
		},
		"no repository": {
			lanes:   []string{"a"},
			out:     "afe-builtin error repository-not-found /workspace/repo\n",
			failure: &Failure{afev1.RepositoryNotFoundReason, "No git repository at /workspace/repo"},
		},
		"no lane branch": {
			lanes:   []string{"a", "feature/x"},
			out:     "afe-builtin unchanged a\nafe-builtin error ref-not-found lane feature/x\n",
			failure: &Failure{afev1.RefNotFoundReason, "Lane feature/x has no branch in /workspace/repo"},
		},
		"no base": {
			lanes:   []string{"a"},
			out:     "afe-builtin error ref-not-found base v9\n",
			failure: &Failure{afev1.RefNotFoundReason, "baseRef v9 does not exist in /workspace/repo"},
		},
		"git failed, with control characters": {
			lanes:   []string{"a"},
			out:     "afe-builtin error git-failed git commit in /workspace/lanes/a\x1b[2J\n",
			failure: &Failure{afev1.GitFailedReason, "git failed: git commit in /workspace/lanes/a?[2J; see status.output"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := NewReport(tc.lanes)
			feed(r, tc.out)
			if why := r.Invalid(); why != "" {
				t.Fatalf("invalid: %s", why)
			}
			if d := cmp.Diff(tc.failure, r.Failure); d != "" {
				t.Fatalf("Failure (-want +got):\n%s", d)
			}
			if r.Done != tc.done || !tc.done {
				return
			}
			got, code := r.Outcome("integration", tc.ci)
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Fatalf("Outcome (-want +got):\n%s", d)
			}
			if code != tc.wantCode {
				t.Fatalf("exit code %d, want %d", code, tc.wantCode)
			}
		})
	}
}

// What only a writer other than the script writes makes a report invalid,
// with a reason that repeats nothing of the line but the Run's own lanes.
func TestReportRefuses(t *testing.T) {
	a, b, base, integ := hx('a'), hx('b'), hx('0'), hx('9')
	good := "afe-builtin base " + base + "\nafe-builtin merged a " + a + "\nafe-builtin merged b " + b +
		"\nafe-builtin integration " + integ + "\nafe-builtin done merged\n"
	files := func(n int) string {
		return strings.Repeat("afe-builtin file b f\n", n)
	}
	conflict := "afe-builtin base " + base + "\nafe-builtin merged a " + a + "\nafe-builtin conflict b " + b + "\n"
	tests := map[string]struct {
		out  string
		want string
	}{
		"the issue's forged lane": {
			"afe-builtin base " + base + "\nafe-builtin merged a " + a + "\nafe-builtin merged zz-forged " + hx('0') + "\n",
			"line 3 names a lane that is not one of this Run's lanes"},
		"a forged lane while committing": {"afe-builtin committed zz-forged " + a + "\n", "line 1 names a lane that is not"},
		"a forged lane in an error":      {"afe-builtin error ref-not-found lane zz-forged\n", "names a lane that is not"},
		"a lane merged twice": {
			"afe-builtin base " + base + "\nafe-builtin merged a " + a + "\nafe-builtin merged a " + a + "\n",
			"line 3 names lane a again, or out of order"},
		"lanes out of order": {"afe-builtin base " + base + "\nafe-builtin merged b " + b + "\n", "names lane b again, or out of order"},
		"a lane committed twice": {
			"afe-builtin committed a " + a + "\nafe-builtin unchanged a\n", "line 2 names lane a again"},
		"a merged lane that also conflicted": {
			"afe-builtin base " + base + "\nafe-builtin merged a " + a + "\nafe-builtin conflict a " + a + "\n", "names lane a again"},
		"an abbreviated commit":      {"afe-builtin base " + base + "\nafe-builtin merged a abc123\n", "a commit that is not a hex object name"},
		"an uppercase commit":        {"afe-builtin base " + strings.ToUpper(hx('a')) + "\n", "a base that is not a hex object name"},
		"a commit with more after":   {"afe-builtin base " + base + "\nafe-builtin merged a " + a + " x\n", "not a hex object name"},
		"a 41-digit commit":          {"afe-builtin base " + base + "0\n", "a base that is not a hex object name"},
		"a line of noise":            {"hello\n", "line 1 is not a line of the report"},
		"an unknown word":            {"afe-builtin pwned a\n", "line 1 is not a line of the report"},
		"a line after done":          {good + "afe-builtin merged zz-forged " + a + "\n", "line 6 comes after the end of the report"},
		"a second error":             {"afe-builtin error git-not-found\nafe-builtin error git-not-found\n", "line 2 comes after the end"},
		"base twice":                 {"afe-builtin base " + base + "\nafe-builtin base " + base + "\n", "says base twice"},
		"integration too early":      {"afe-builtin base " + base + "\nafe-builtin merged a " + a + "\nafe-builtin integration " + integ + "\n", "says integration before every lane merged"},
		"done without integration":   {"afe-builtin base " + base + "\nafe-builtin done merged\n", "says done out of place"},
		"done merged after conflict": {conflict + "afe-builtin integration " + integ + "\nafe-builtin done merged\n", "says done out of place"},
		"a file of another lane":     {conflict + "afe-builtin file a x\n", "names another lane than the one that conflicted"},
		"a file without a conflict":  {"afe-builtin base " + base + "\nafe-builtin file a x\n", "says file out of place"},
		"more files than listed":     {conflict + files(MaxConflictFiles+1), fmt.Sprintf("line %d lists more conflicting files", 3+MaxConflictFiles+1)},
		"more file names than listed": {
			conflict + strings.Repeat("afe-builtin file b "+strings.Repeat("n", 16<<10)+"\n", MaxConflictNames/(16<<10)+1),
			"lists more conflicting files than the script does"},
		"a file after truncated": {conflict + "afe-builtin truncated b\nafe-builtin file b x\n", "says file out of place"},
		"a long line":            {"afe-builtin base " + strings.Repeat("0", maxReportLine), "line 1 is longer than 20480 bytes"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := NewReport([]string{"a", "b"})
			feed(r, tc.out)
			if got := r.Invalid(); !strings.Contains(got, tc.want) {
				t.Fatalf("Invalid() = %q, want %q", got, tc.want)
			}
			if strings.Contains(r.Invalid(), "zz-forged") {
				t.Fatalf("the reason repeats the forged lane: %q", r.Invalid())
			}
		})
	}
}

// The bounds of the line reader itself, beyond any grammar: total bytes,
// lines, and the length of a line, whatever the cut.
func TestLinesBounds(t *testing.T) {
	tests := map[string]struct {
		out  string
		want string
	}{
		"within":          {strings.Repeat("x\n", 10), ""},
		"too many lines":  {strings.Repeat("x\n", 11), "it has more than 10 lines"},
		"too many bytes":  {strings.Repeat("xxxxxxxxx\n", 7), "it is longer than 64 bytes"},
		"a line too long": {"x\n" + strings.Repeat("y", 17) + "\n", "line 2 is longer than 16 bytes"},
		"an unended line": {strings.Repeat("y", 16), ""},
		"refused":         {"x\nno\nx\n", "line 2 no"},
	}
	for name, tc := range tests {
		for _, size := range []int{1, 3, 64} {
			t.Run(fmt.Sprintf("%s/%d", name, size), func(t *testing.T) {
				l := lines{maxBytes: 64, maxLines: 10, maxLine: 16, parse: func(s string) string {
					if s == "no" {
						return "no"
					}
					return ""
				}}
				for b := []byte(tc.out); len(b) > 0; {
					n := min(size, len(b))
					l.write(b[:n])
					b = b[n:]
				}
				if l.invalid != tc.want {
					t.Fatalf("invalid %q, want %q", l.invalid, tc.want)
				}
			})
		}
	}
}

// 100 MB of forged lines, as the filter writes them: the report is
// invalid from the first, drains the rest at once and keeps nothing of it.
func TestReportFlood(t *testing.T) {
	line := "afe-builtin merged zz-forged " + hx('0') + "\n"
	chunk := []byte(strings.Repeat(line, (32<<10)/len(line)))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	r := NewReport([]string{"a"})
	start := time.Now()
	written := 0
	for written < 100<<20 {
		n, err := r.Write(chunk)
		if err != nil || n != len(chunk) {
			t.Fatalf("Write = %d, %v", n, err)
		}
		written += n
	}
	elapsed := time.Since(start)
	runtime.GC()
	runtime.ReadMemStats(&after)
	grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("%d MiB written in %v; heap %+d KiB", written>>20, elapsed, grew>>10)
	if !strings.Contains(r.Invalid(), "line 1 names a lane that is not one of this Run's lanes") {
		t.Fatalf("Invalid() = %q", r.Invalid())
	}
	if len(r.Merged) != 0 || grew > 1<<20 {
		t.Fatalf("kept %d lanes, heap grew by %d bytes", len(r.Merged), grew)
	}
	runtime.KeepAlive(r)
}

func TestFieldsAreTheResultKeys(t *testing.T) {
	r := NewReport([]string{"a"})
	feed(r, "afe-builtin base "+hx('0')+"\nafe-builtin merged a "+hx('a')+"\nafe-builtin integration "+hx('1')+"\nafe-builtin done merged\n")
	o, _ := r.Outcome("int", &CI{ExitCode: 0})
	f := Fields(o)
	for _, k := range []string{"merged", "conflicts", "ci_passed", "ci_output", "ci_exit_code", "integration_commit", "lanes"} {
		if _, ok := f[k]; !ok {
			t.Fatalf("no key %s in %v", k, f)
		}
	}
	if string(f["conflicts"]) != "[]" {
		t.Fatalf("empty list: %s", f["conflicts"])
	}
}
