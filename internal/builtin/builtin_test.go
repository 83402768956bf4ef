package builtin

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

func TestValidateRefName(t *testing.T) {
	tests := map[string]struct {
		in string
		ok bool
	}{
		"simple":             {"lane-a", true},
		"nested":             {"feature/x_1.2", true},
		"sha":                {"0123456789abcdef0123456789abcdef01234567", true},
		"upper":              {"Release/V1", true},
		"empty":              {"", false},
		"leading dash":       {"-delete", false},
		"leading dot":        {".hidden", false},
		"component dot":      {"a/.b", false},
		"component dash":     {"a/-b", false},
		"dot dot":            {"a..b", false},
		"parent":             {"../x", false},
		"trailing slash":     {"a/", false},
		"leading slash":      {"/a", false},
		"double slash":       {"a//b", false},
		"trailing dot":       {"a.", false},
		"lock":               {"a.lock", false},
		"lock component":     {"a.lock/b", false},
		"space":              {"a b", false},
		"newline":            {"a\nb", false},
		"reflog":             {"a@{1}", false},
		"tilde":              {"main~1", false},
		"glob":               {"a*", false},
		"colon":              {"a:b", false},
		"backslash":          {`a\b`, false},
		"non ascii":          {"bränch", false},
		"too long":           {strings.Repeat("a", MaxRefName+1), false},
		"longest":            {strings.Repeat("a", MaxRefName), true},
		"shell substitution": {"$(id)", false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := ValidateRefName(tc.in)
			if (err == nil) != tc.ok {
				t.Fatalf("ValidateRefName(%q) = %v, want ok=%v", tc.in, err, tc.ok)
			}
		})
	}
}

func TestMergeValidate(t *testing.T) {
	good := Merge{Lanes: []string{"a", "b"}, Integration: "integration", Base: "main"}
	tests := map[string]struct {
		mutate func(*Merge)
		want   string
	}{
		"good":                {func(*Merge) {}, ""},
		"no lanes":            {func(m *Merge) { m.Lanes = nil }, "lanes is empty"},
		"twice":               {func(m *Merge) { m.Lanes = []string{"a", "a"} }, "listed twice"},
		"integration a lane":  {func(m *Merge) { m.Integration = "b" }, "also a lane"},
		"bad lane":            {func(m *Merge) { m.Lanes = []string{"-x"} }, `lane "-x"`},
		"bad base":            {func(m *Merge) { m.Base = "a..b" }, "baseRef"},
		"bad integration":     {func(m *Merge) { m.Integration = "" }, "integrationBranch"},
		"lane with a newline": {func(m *Merge) { m.Lanes = []string{"a\nb"} }, "lane"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m := good
			m.Lanes = append([]string{}, good.Lanes...)
			tc.mutate(&m)
			err := m.Validate()
			got := ""
			if err != nil {
				got = err.Error()
			}
			if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Fatalf("Validate() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestMergeOfDefaultsAndEnv(t *testing.T) {
	run := &afev1.Run{}
	run.Name = "merge-1"
	run.CreationTimestamp.Time = time.Unix(1700000000, 0)
	run.Status.Attempts = 2
	run.Spec.Lanes = []afev1.GitRefName{"a", "b/c"}
	run.Spec.BaseRef = "main"
	m := MergeOf(run)
	if m.Integration != "integration" || m.IntegrationDir() != "/workspace/lanes/integration" {
		t.Fatalf("defaults: %+v %s", m, m.IntegrationDir())
	}
	want := []string{
		"AFE_REPO=/workspace/repo", "AFE_LANES_DIR=/workspace/lanes", "AFE_LANES=a\nb/c", "AFE_BASE=main",
		"AFE_INTEGRATION=integration", "AFE_RUN=merge-1", "AFE_DATE=@1700000000 +0000", "AFE_ATTEMPT=2",
	}
	if d := cmp.Diff(want, m.Env()); d != "" {
		t.Fatalf("Env (-want +got):\n%s", d)
	}
}

func TestReport(t *testing.T) {
	tests := map[string]struct {
		out      string
		ci       *CI
		want     Outcome
		wantCode int
		failure  *Failure
		done     bool
	}{
		"merged and CI passed": {
			out: "afe-builtin committed a 111\nafe-builtin unchanged b\nnoise\nafe-builtin base 000\n" +
				"afe-builtin merged a 111\nafe-builtin merged b 222\nafe-builtin integration 333\nafe-builtin done merged\n",
			ci:   &CI{ExitCode: 0, Output: "ok\n"},
			done: true,
			want: Outcome{Merged: true, Conflicts: []Conflict{}, CIPassed: true, CIOutput: "ok\n", CIExitCode: ptr(0),
				BaseCommit: "000", IntegrationBranch: "integration", IntegrationCommit: "333",
				Lanes: []LaneCommit{{"a", "111"}, {"b", "222"}}},
			wantCode: 0,
		},
		"red CI": {
			out:  "afe-builtin base 000\nafe-builtin merged a 111\nafe-builtin integration 333\nafe-builtin done merged\n",
			ci:   &CI{ExitCode: 2, Output: "FAIL\n"},
			done: true,
			want: Outcome{Merged: true, Conflicts: []Conflict{}, CIPassed: false, CIOutput: "FAIL\n", CIExitCode: ptr(2),
				BaseCommit: "000", IntegrationBranch: "integration", IntegrationCommit: "333", Lanes: []LaneCommit{{"a", "111"}}},
			wantCode: 2,
		},
		"conflict with quoted and spaced paths": {
			out: "afe-builtin base 000\nafe-builtin merged a 111\nafe-builtin conflict b 222\n" +
				"afe-builtin file b src/main.go\nafe-builtin file b with space.txt\n" +
				"afe-builtin file b \"caf\\303\\251 \\\"q\\\".txt\"\nafe-builtin file other ignored\n" +
				"afe-builtin integration 444\nafe-builtin done conflict\n",
			done: true,
			want: Outcome{Merged: false, Conflicts: []Conflict{{Lane: "b", Files: []string{"src/main.go", "with space.txt", "café \"q\".txt"}}},
				BaseCommit: "000", IntegrationBranch: "integration", IntegrationCommit: "444", Lanes: []LaneCommit{{"a", "111"}}},
			wantCode: 1,
		},
		"no git": {
			out:     "afe-builtin error git-not-found\n",
			failure: &Failure{afev1.GitNotFoundReason, "git is not installed in the sandbox image (no git on its PATH)"},
		},
		"no repository": {
			out:     "afe-builtin error repository-not-found /workspace/repo\n",
			failure: &Failure{afev1.RepositoryNotFoundReason, "No git repository at /workspace/repo"},
		},
		"no lane branch": {
			out:     "afe-builtin error ref-not-found lane feature/x\n",
			failure: &Failure{afev1.RefNotFoundReason, "Lane feature/x has no branch in /workspace/repo"},
		},
		"no base": {
			out:     "afe-builtin error ref-not-found base v9\n",
			failure: &Failure{afev1.RefNotFoundReason, "baseRef v9 does not exist in /workspace/repo"},
		},
		"the first error counts": {
			out:     "afe-builtin error git-failed git commit in /workspace/lanes/a\nafe-builtin error git-not-found\n",
			failure: &Failure{afev1.GitFailedReason, "git failed: git commit in /workspace/lanes/a; see status.output"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := &Report{}
			// Fed in small pieces, as a stream comes.
			for b := []byte(tc.out); len(b) > 0; {
				n := min(7, len(b))
				_, _ = r.Write(b[:n])
				b = b[n:]
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

func TestReportLimits(t *testing.T) {
	r := &Report{}
	var b strings.Builder
	b.WriteString("afe-builtin conflict a 1\n")
	for i := 0; i < MaxConflictFiles+10; i++ {
		b.WriteString("afe-builtin file a f\n")
	}
	b.WriteString("afe-builtin file a " + strings.Repeat("x", maxReportLine) + "\n")
	b.WriteString("afe-builtin done conflict\n")
	_, _ = r.Write([]byte(b.String()))
	if !r.Done || len(r.Conflict.Files) != MaxConflictFiles || !r.Conflict.FilesTruncated {
		t.Fatalf("done %v, %d files, truncated %v", r.Done, len(r.Conflict.Files), r.Conflict.FilesTruncated)
	}
}

func TestFieldsAreTheResultKeys(t *testing.T) {
	r := &Report{}
	_, _ = r.Write([]byte("afe-builtin base 0\nafe-builtin integration 1\nafe-builtin done merged\n"))
	o, _ := r.Outcome("int", &CI{ExitCode: 0})
	f := Fields(o)
	for _, k := range []string{"merged", "conflicts", "ci_passed", "ci_output", "ci_exit_code", "integration_commit", "lanes"} {
		if _, ok := f[k]; !ok {
			t.Fatalf("no key %s in %v", k, f)
		}
	}
	if string(f["conflicts"]) != "[]" || string(f["lanes"]) != "[]" {
		t.Fatalf("empty lists: %s %s", f["conflicts"], f["lanes"])
	}
}

func ptr[T any](v T) *T { return &v }
