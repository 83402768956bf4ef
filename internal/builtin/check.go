package builtin

import (
	_ "embed"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
)

// CheckScript reads, once the git part has exited, what the repository says
// of the commits its report names (check.sh).
//
//go:embed check.sh
var CheckScript string

// CheckCommand is the exec command of the check; its environment is the git
// part's (Merge.Env).
func CheckCommand() []string { return []string{"/bin/sh", "-c", CheckScript, "afe-check"} }

// Groups of the checks. Run attempts have groups from 2,000,000,000 up to
// 2,100,000,000 (internal/runexec), a sandbox's own group is below 2^31-1,
// and the engine takes none above that.
const (
	checkGIDBase = 2_100_000_000
	checkGIDSpan = 47_000_000
)

// CheckGID is the group the check of a Run's attempt runs with: no Run
// attempt's group, never the sandbox's own. Linux lets a process open
// another's file descriptors through /proc, or trace it, only when both its
// uid and its group match (without CAP_SYS_PTRACE, which no sandbox has), so
// nothing of the workload, which runs as the sandbox's uid with the
// sandbox's group or an attempt's, can write to the check's output.
func CheckGID(runUID string, attempt int32, sandboxGID int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(runUID + "/check/" + strconv.Itoa(int(attempt))))
	off := int(h.Sum32() % checkGIDSpan)
	if checkGIDBase+off == sandboxGID {
		off = (off + 1) % checkGIDSpan
	}
	return checkGIDBase + off
}

const (
	checkPrefix    = "afe-check "
	maxCheckBytes  = 64 << 10
	maxCheckLines  = 64
	maxCheckLine   = 1 << 10
	missingCommit  = "-"
	inIntegration  = "in"
	outIntegration = "out"
)

// LaneState is where a lane's branch is, and whether that commit is in the
// integration branch.
type LaneState struct {
	Lane   string
	Commit string
	In     bool
}

// Check is what the check says of the repository, as CheckScript prints it:
// each of the Run's lanes once, in order, then the integration branch, the
// base and "done"; anything else makes it invalid. Commit names are "" where
// a ref names no commit. It is an io.Writer, fed as the output comes.
type Check struct {
	lockedLines
	lanes       []string
	Lanes       []LaneState
	Integration string
	Base        string
	BaseIn      bool
	Done        bool
	integrated  bool
	based       bool
}

// NewCheck is the check of a git part that merged lanes.
func NewCheck(lanes []string) *Check {
	c := &Check{lanes: lanes}
	c.stream = lines{maxBytes: maxCheckBytes, maxLines: maxCheckLines, maxLine: maxCheckLine, parse: c.parse}
	return c
}

func (c *Check) parse(line string) string {
	rest, ok := strings.CutPrefix(line, checkPrefix)
	if !ok || c.Done {
		return "is not a line of the check"
	}
	f := strings.Split(rest, " ")
	switch {
	case f[0] == "lane" && len(f) == 4 && !c.integrated && len(c.Lanes) < len(c.lanes) && f[1] == c.lanes[len(c.Lanes)]:
		commit, ok := checkCommit(f[2])
		in, ok2 := checkIn(f[3])
		if !ok || !ok2 {
			return "is not a line of the check"
		}
		c.Lanes = append(c.Lanes, LaneState{Lane: f[1], Commit: commit, In: in})
	case f[0] == "integration" && len(f) == 2 && !c.integrated && len(c.Lanes) == len(c.lanes):
		commit, ok := checkCommit(f[1])
		if !ok {
			return "is not a line of the check"
		}
		c.Integration, c.integrated = commit, true
	case f[0] == "base" && len(f) == 3 && c.integrated && !c.based:
		commit, ok := checkCommit(f[1])
		in, ok2 := checkIn(f[2])
		if !ok || !ok2 {
			return "is not a line of the check"
		}
		c.Base, c.BaseIn, c.based = commit, in, true
	case f[0] == "done" && len(f) == 1 && c.based:
		c.Done = true
	default:
		return "is not a line of the check"
	}
	return ""
}

func checkCommit(s string) (string, bool) {
	if s == missingCommit {
		return "", true
	}
	return s, isCommit(s)
}

func checkIn(s string) (bool, bool) {
	return s == inIntegration, s == inIntegration || s == outIntegration
}

// Verify compares what the git part reported with what the repository
// says once it has exited (the check, and how it ended), and returns what
// does not match, or "". Every commit the outcome names is checked: the
// lanes committed and merged are where their branches are, merged lanes are
// in the integration branch, a conflicting lane is not, and the base and
// the integration commit are the repository's.
func (r *Report) Verify(c *Check, exitCode int) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if why := c.stream.invalid; why != "" {
		return "the check of the repository is unreadable: " + why
	}
	if exitCode != 0 || !c.Done {
		return fmt.Sprintf("the check of the repository ended with exit code %d before it finished", exitCode)
	}
	at := make(map[string]LaneState, len(c.Lanes))
	for _, l := range c.Lanes {
		at[l.Lane] = l
	}
	for _, l := range r.Committed {
		if got := at[l.Lane].Commit; got != l.Commit {
			return fmt.Sprintf("it says lane %s was committed as %s, but its branch is %s", l.Lane, l.Commit, where(got))
		}
	}
	for _, l := range r.Merged {
		s := at[l.Lane]
		if s.Commit != l.Commit {
			return fmt.Sprintf("it says lane %s was merged at %s, but its branch is %s", l.Lane, l.Commit, where(s.Commit))
		}
		if !s.In {
			return fmt.Sprintf("it says lane %s was merged, but %s is not in the integration branch", l.Lane, l.Commit)
		}
	}
	if r.Conflict != nil {
		s := at[r.Conflict.Lane]
		if s.Commit != r.conflictAt {
			return fmt.Sprintf("it says lane %s conflicted at %s, but its branch is %s", r.Conflict.Lane, r.conflictAt, where(s.Commit))
		}
		if s.In {
			return fmt.Sprintf("it says lane %s conflicted, but %s is in the integration branch", r.Conflict.Lane, s.Commit)
		}
	}
	if r.Integration != c.Integration {
		return fmt.Sprintf("it says the integration branch is at %s, but it is %s", r.Integration, where(c.Integration))
	}
	if r.Base != c.Base {
		return fmt.Sprintf("it says the base is %s, but baseRef is %s", r.Base, where(c.Base))
	}
	if !c.BaseIn {
		return fmt.Sprintf("the base %s is not in the integration branch", r.Base)
	}
	return ""
}

// where is a commit of the check, in a message.
func where(commit string) string {
	if commit == "" {
		return "missing"
	}
	return "at " + commit
}
