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
		"AFE_MAX_CONFLICT_FILES=500", "AFE_MAX_CONFLICT_NAMES=262144",
	}
	if d := cmp.Diff(want, m.Env()); d != "" {
		t.Fatalf("Env (-want +got):\n%s", d)
	}
}

func ptr[T any](v T) *T { return &v }
