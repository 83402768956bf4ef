package builtin

import (
	"encoding/json"
	"strconv"
	"strings"
	"sync"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/runexec"
)

// Limits of what the git part's report keeps.
const (
	// MaxConflictFiles is how many conflicting files a result lists.
	MaxConflictFiles = 500
	// maxReportLine bounds one protocol line; longer ones are dropped.
	maxReportLine = 16 << 10
	// CIOutputLimit is how much of ciScript's output ci_output keeps.
	CIOutputLimit = 4 << 10
)

const reportPrefix = "afe-builtin "

// LaneCommit is a lane merged, at the commit it was merged at.
type LaneCommit struct {
	Lane   string `json:"lane"`
	Commit string `json:"commit"`
}

// Conflict is the lane whose merge conflicted, and the conflicting files.
type Conflict struct {
	Lane  string   `json:"lane"`
	Files []string `json:"files"`
	// FilesTruncated is true when more than MaxConflictFiles conflicted.
	FilesTruncated bool `json:"files_truncated,omitempty"`
}

// Failure is why the git part could not do its work.
type Failure struct {
	// Reason is a Run condition reason.
	Reason  string
	Message string
}

// Report is what the git part said on stdout. It is an io.Writer, fed as
// the output comes.
type Report struct {
	mu          sync.Mutex
	lines       *runexec.Lines
	Base        string
	Merged      []LaneCommit
	Committed   []string
	Conflict    *Conflict
	Integration string
	// Done is true once the git part said it finished ("done").
	Done bool
	// Failure is set when it said it could not go on ("error").
	Failure *Failure
}

// Write parses complete lines.
func (r *Report) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lines == nil {
		r.lines = &runexec.Lines{Max: maxReportLine, Line: func(line []byte) { r.parse(string(line)) }}
	}
	return r.lines.Write(p)
}

// parse takes one line: "afe-builtin WORD ARGS...", where the last argument
// of "file" and "error" runs to the end of the line.
func (r *Report) parse(line string) {
	rest, ok := strings.CutPrefix(line, reportPrefix)
	if !ok {
		return
	}
	word, rest, _ := strings.Cut(rest, " ")
	switch word {
	case "error":
		if r.Failure == nil {
			r.Failure = failure(rest)
		}
	case "committed":
		lane, _, _ := strings.Cut(rest, " ")
		r.Committed = append(r.Committed, lane)
	case "base":
		r.Base = rest
	case "merged":
		lane, commit, _ := strings.Cut(rest, " ")
		r.Merged = append(r.Merged, LaneCommit{Lane: lane, Commit: commit})
	case "conflict":
		lane, _, _ := strings.Cut(rest, " ")
		if r.Conflict == nil {
			r.Conflict = &Conflict{Lane: lane, Files: []string{}}
		}
	case "file":
		lane, file, _ := strings.Cut(rest, " ")
		if r.Conflict == nil || r.Conflict.Lane != lane {
			return
		}
		if len(r.Conflict.Files) >= MaxConflictFiles {
			r.Conflict.FilesTruncated = true
			return
		}
		r.Conflict.Files = append(r.Conflict.Files, unquotePath(file))
	case "integration":
		r.Integration = rest
	case "done":
		r.Done = true
	}
}

// failure turns "WORD DETAIL" of an error line into a reason and message.
func failure(s string) *Failure {
	word, detail, _ := strings.Cut(s, " ")
	switch word {
	case "git-not-found":
		return &Failure{afev1.GitNotFoundReason, "git is not installed in the sandbox image (no git on its PATH)"}
	case "repository-not-found":
		return &Failure{afev1.RepositoryNotFoundReason, "No git repository at " + afev1.RepoDir}
	case "ref-not-found":
		what, name, _ := strings.Cut(detail, " ")
		if what == "lane" {
			return &Failure{afev1.RefNotFoundReason, "Lane " + name + " has no branch in " + afev1.RepoDir}
		}
		return &Failure{afev1.RefNotFoundReason, "baseRef " + name + " does not exist in " + afev1.RepoDir}
	case "git-failed":
		return &Failure{afev1.GitFailedReason, "git failed: " + detail + "; see status.output"}
	}
	return &Failure{afev1.GitFailedReason, "git failed: " + strings.TrimSpace(s) + "; see status.output"}
}

// unquotePath reads a path as git prints it with core.quotePath: as is, or
// C-quoted in double quotes when it holds unusual bytes.
func unquotePath(s string) string {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		if u, err := strconv.Unquote(s); err == nil {
			return strings.ToValidUTF8(u, "\uFFFD")
		}
	}
	return s
}

// CI is how ciScript ended.
type CI struct {
	ExitCode int
	Output   string
}

// Outcome is a MergeAndCI result, as it goes into status.result.
type Outcome struct {
	Merged            bool         `json:"merged"`
	Conflicts         []Conflict   `json:"conflicts"`
	CIPassed          bool         `json:"ci_passed"`
	CIOutput          string       `json:"ci_output"`
	CIExitCode        *int         `json:"ci_exit_code,omitempty"`
	BaseCommit        string       `json:"base_commit,omitempty"`
	IntegrationBranch string       `json:"integration_branch"`
	IntegrationCommit string       `json:"integration_commit,omitempty"`
	Lanes             []LaneCommit `json:"lanes"`
}

// Outcome composes the result of a git part that finished, with ciScript's
// end when it ran (nil after a conflict), and the Run's exit code: ciScript's,
// 1 after a conflict.
func (r *Report) Outcome(integration string, ci *CI) (Outcome, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	o := Outcome{
		Merged:            r.Conflict == nil,
		Conflicts:         []Conflict{},
		BaseCommit:        r.Base,
		IntegrationBranch: integration,
		IntegrationCommit: r.Integration,
		Lanes:             append([]LaneCommit{}, r.Merged...),
	}
	code := 1
	if r.Conflict != nil {
		o.Conflicts = append(o.Conflicts, *r.Conflict)
	}
	if ci != nil {
		code = ci.ExitCode
		o.CIPassed = ci.ExitCode == 0
		o.CIOutput = ci.Output
		o.CIExitCode = &ci.ExitCode
	}
	return o, code
}

// Fields are the keys of status.result of an outcome.
func Fields(v any) map[string]json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return nil
	}
	return m
}
