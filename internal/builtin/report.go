package builtin

import (
	"encoding/json"
	"strconv"
	"strings"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// Bounds of the git part's report. Its channel is a pipe that processes the
// repository starts (filters, merge drivers) can open too, so whatever it
// carries, a Report keeps no more than this; a report past a bound is
// invalid, and so is any line the script does not write.
const (
	// MaxConflictFiles is how many conflicting files a result lists; the
	// script lists no more, and says when there were more.
	MaxConflictFiles = 500
	// MaxConflictNames bounds the bytes of the conflicting files' names the
	// script lists; it says when there were more.
	MaxConflictNames = 256 << 10
	// maxReportLine bounds one line: a C-quoted path of PATH_MAX bytes fits.
	maxReportLine = 20 << 10
	// maxReportLines and maxReportBytes bound a report, well above what the
	// script writes for the most lanes a Run has and MaxConflictFiles
	// files.
	maxReportLines = 2048
	maxReportBytes = 1 << 20
	// maxFailureDetail bounds the detail of an "error" line kept for a
	// condition message.
	maxFailureDetail = 1 << 10
	// CIOutputLimit is how much of ciScript's output ci_output keeps.
	CIOutputLimit = 4 << 10
)

const reportPrefix = "afe-builtin "

// LaneCommit is a lane merged, at the commit it was merged at (the wire
// type, api/v1alpha1).
type LaneCommit = afev1.MergedLane

// Conflict is the lane whose merge conflicted, and the conflicting files.
type Conflict = afev1.MergeConflict

// Failure is why the git part could not do its work.
type Failure struct {
	// Reason is a Run condition reason.
	Reason  string
	Message string
}

// phase is where the git part is in its report.
type phase int

const (
	phaseCommit     phase = iota // committing the lanes' worktrees
	phaseMerge                   // merging the lanes, after "base"
	phaseFiles                   // listing a conflict's files
	phaseIntegrated              // after "integration", before "done"
	phaseEnd                     // after "done" or "error"
)

// Report is what the git part said on stdout. It is an io.Writer, fed as
// the output comes, and reads only what the script writes, in the order it
// writes it, for the Run's own lanes: each lane is named at most once per
// step and only in the Run's order, every commit is a hex object name, and
// the whole is bounded. Anything else makes the report invalid (Invalid),
// and nothing of it is an outcome. A valid report may still lie (a filter
// can write well-formed lines too): what it says is verified against the
// repository once the git part has exited (Verify).
type Report struct {
	lockedLines
	lanes []string
	index map[string]int
	phase phase
	// next is the position in lanes the next lane named must be at, or
	// after (while committing).
	next int
	// conflictAt is the commit of the lane that conflicted.
	conflictAt string
	// names counts the bytes of the conflicting files' names listed.
	names int

	Base        string
	Committed   []LaneCommit
	Merged      []LaneCommit
	Conflict    *Conflict
	Integration string
	// Done is true once the git part said it finished ("done").
	Done bool
	// Failure is set when it said it could not go on ("error").
	Failure *Failure
}

// NewReport is the report of a git part merging lanes, in that order.
func NewReport(lanes []string) *Report {
	r := &Report{lanes: lanes, index: make(map[string]int, len(lanes))}
	for i, l := range lanes {
		r.index[l] = i
	}
	r.stream = lines{maxBytes: maxReportBytes, maxLines: maxReportLines, maxLine: maxReportLine, parse: r.parse}
	return r
}

// parse takes one line: "afe-builtin WORD ARGS...", where the last argument
// of "file" and "error" runs to the end of the line. It returns why the
// line is refused, or "". A lane is named in refusals only when it is one
// of the Run's: nothing else of a refused line is repeated.
func (r *Report) parse(line string) string {
	rest, ok := strings.CutPrefix(line, reportPrefix)
	if !ok {
		return "is not a line of the report"
	}
	if r.phase == phaseEnd {
		return "comes after the end of the report"
	}
	word, rest, _ := strings.Cut(rest, " ")
	switch word {
	case "error":
		return r.parseError(rest)
	case "unchanged", "committed":
		return r.parseCommitted(word, rest)
	case "base":
		return r.parseBase(rest)
	case "merged", "conflict":
		return r.parseMerged(word, rest)
	case "file", "truncated":
		return r.parseFile(word, rest)
	case "integration":
		return r.parseIntegration(rest)
	case "done":
		return r.parseDone(rest)
	}
	return "is not a line of the report"
}

// parseError takes "error REASON...", the end of the report.
func (r *Report) parseError(rest string) string {
	if lane, ok := strings.CutPrefix(rest, "ref-not-found lane "); ok {
		if _, ok := r.index[lane]; !ok {
			return "names a lane that is not one of this Run's lanes"
		}
	}
	r.Failure = failure(rest)
	r.phase = phaseEnd
	return ""
}

// laneLine reads the "LANE COMMIT" of a line of word ("LANE" alone when
// withCommit is false), which must come in phase p (else it says word
// when) and name a lane at r.next, or after it unless strict. It returns
// the lane, its commit and its position, or why the line is refused.
func (r *Report) laneLine(word, rest string, p phase, when string, strict, withCommit bool) (lane, commit string, i int, why string) {
	lane, commit, hasCommit := strings.Cut(rest, " ")
	i, ok := r.index[lane]
	switch {
	case !ok:
		return "", "", 0, "names a lane that is not one of this Run's lanes"
	case r.phase != p:
		return "", "", 0, "says " + word + " " + when
	case i < r.next || strict && i != r.next:
		return "", "", 0, "names lane " + lane + " again, or out of order"
	case !withCommit && hasCommit:
		return "", "", 0, "is not a line of the report"
	case withCommit && !isCommit(commit):
		return "", "", 0, "gives lane " + lane + " a commit that is not a hex object name"
	}
	return lane, commit, i, ""
}

// parseCommitted takes "unchanged LANE" and "committed LANE COMMIT" while
// the lanes' worktrees are committed: each lane once at most, in the Run's
// order, some perhaps skipped.
func (r *Report) parseCommitted(word, rest string) string {
	lane, commit, i, why := r.laneLine(word, rest, phaseCommit, "after the merge began", false, word == "committed")
	if why != "" {
		return why
	}
	if word == "committed" {
		r.Committed = append(r.Committed, LaneCommit{Lane: lane, Commit: commit})
	}
	r.next = i + 1
	return ""
}

// parseBase takes "base COMMIT", which ends the commits and begins the
// merge.
func (r *Report) parseBase(rest string) string {
	if r.phase != phaseCommit {
		return "says base twice, or late"
	}
	if !isCommit(rest) {
		return "gives a base that is not a hex object name"
	}
	r.Base, r.phase, r.next = rest, phaseMerge, 0
	return ""
}

// parseMerged takes "merged LANE COMMIT" and "conflict LANE COMMIT" while
// the lanes are merged: every lane in the Run's order, until one
// conflicts.
func (r *Report) parseMerged(word, rest string) string {
	lane, commit, _, why := r.laneLine(word, rest, phaseMerge, "out of place", true, true)
	if why != "" {
		return why
	}
	r.next++
	if word == "merged" {
		r.Merged = append(r.Merged, LaneCommit{Lane: lane, Commit: commit})
		return ""
	}
	r.Conflict, r.conflictAt, r.phase = &Conflict{Lane: lane, Files: []string{}}, commit, phaseFiles
	return ""
}

// parseFile takes "file LANE PATH" and "truncated LANE", the files of the
// lane that conflicted, within the bounds of the list.
func (r *Report) parseFile(word, rest string) string {
	if r.phase != phaseFiles || r.Conflict.FilesTruncated {
		return "says " + word + " out of place"
	}
	lane, file, _ := strings.Cut(rest, " ")
	if lane != r.Conflict.Lane {
		return "names another lane than the one that conflicted"
	}
	if word == "truncated" {
		if file != "" {
			return "is not a line of the report"
		}
		r.Conflict.FilesTruncated = true
		return ""
	}
	r.names += len(file)
	if len(r.Conflict.Files) == MaxConflictFiles || r.names > MaxConflictNames {
		return "lists more conflicting files than the script does"
	}
	r.Conflict.Files = append(r.Conflict.Files, unquotePath(file))
	return ""
}

// parseIntegration takes "integration COMMIT", once every lane merged or
// one conflicted.
func (r *Report) parseIntegration(rest string) string {
	if r.phase != phaseFiles && (r.phase != phaseMerge || r.next != len(r.lanes)) {
		return "says integration before every lane merged or one conflicted"
	}
	if !isCommit(rest) {
		return "gives an integration commit that is not a hex object name"
	}
	r.Integration, r.phase = rest, phaseIntegrated
	return ""
}

// parseDone takes "done merged" or "done conflict", the end of the report.
func (r *Report) parseDone(rest string) string {
	want := "merged"
	if r.Conflict != nil {
		want = "conflict"
	}
	if r.phase != phaseIntegrated || rest != want {
		return "says done out of place"
	}
	r.Done, r.phase = true, phaseEnd
	return ""
}

// isCommit tells whether s is a full object name as git prints it: 40
// (SHA-1) or 64 (SHA-256) lowercase hex digits.
func isCommit(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if (s[i] < '0' || s[i] > '9') && (s[i] < 'a' || s[i] > 'f') {
			return false
		}
	}
	return true
}

// failure turns "WORD DETAIL" of an error line into a reason and message.
func failure(s string) *Failure {
	s = strings.Map(func(c rune) rune {
		if c < ' ' || c == 0x7f {
			return '?'
		}
		return c
	}, strings.ToValidUTF8(s[:min(len(s), maxFailureDetail)], "\uFFFD"))
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

// Outcome is a MergeAndCI result, as it goes into status.result (the wire
// type, api/v1alpha1, which clients decode it into).
type Outcome = afev1.MergeAndCIResult

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
