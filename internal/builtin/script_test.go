package builtin

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The git script against the machine's git and sh, in a temporary
// workspace laid out as in a sandbox: repo/ and lanes/<branch>.

type workspace struct {
	t    *testing.T
	dir  string
	repo string
}

func newWorkspace(t *testing.T, lanes ...string) *workspace {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("these tests need git: %v", err)
	}
	w := &workspace{t: t, dir: t.TempDir()}
	w.repo = filepath.Join(w.dir, "repo")
	w.git("", "init", "-q", "-b", "main", w.repo)
	w.write("repo/shared.txt", "one\ntwo\nthree\n")
	w.git(w.repo, "add", "-A")
	w.git(w.repo, "commit", "-q", "-m", "base")
	for _, l := range lanes {
		w.git(w.repo, "worktree", "add", "-q", "-b", l, filepath.Join(w.dir, "lanes", l), "main")
	}
	return w
}

func (w *workspace) git(dir string, args ...string) string {
	w.t.Helper()
	if dir != "" {
		args = append([]string{"-C", dir}, args...)
	}
	cmd := exec.Command("git", args...)
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
	out, err := cmd.CombinedOutput()
	if err != nil {
		w.t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func (w *workspace) write(rel, content string) {
	w.t.Helper()
	p := filepath.Join(w.dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		w.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		w.t.Fatal(err)
	}
}

// merge runs the script and returns its report and stderr.
func (w *workspace) merge(m Merge) (*Report, string) {
	w.t.Helper()
	if m.Integration == "" {
		m.Integration = "integration"
	}
	if m.Base == "" {
		m.Base = "main"
	}
	m.Run = "run-1"
	m.Date = time.Unix(1700000000, 0)
	if m.Attempt == 0 {
		m.Attempt = 1
	}
	cmd := exec.Command(MergeCommand()[0], MergeCommand()[1:]...)
	cmd.Env = append(os.Environ(), m.Env()...)
	cmd.Env = append(cmd.Env, "AFE_REPO="+w.repo, "AFE_LANES_DIR="+filepath.Join(w.dir, "lanes"), "HOME="+w.dir)
	rep := NewReport(m.Lanes)
	var stderr strings.Builder
	cmd.Stdout, cmd.Stderr = rep, &stderr
	if err := cmd.Run(); err != nil {
		w.t.Fatalf("script: %v\n%s", err, stderr.String())
	}
	return rep, stderr.String()
}

// check runs the check script after a merge of m and returns what it
// found of the report.
func (w *workspace) check(m Merge, rep *Report) string {
	w.t.Helper()
	if m.Integration == "" {
		m.Integration = "integration"
	}
	if m.Base == "" {
		m.Base = "main"
	}
	cmd := exec.Command(CheckCommand()[0], CheckCommand()[1:]...)
	cmd.Env = append(os.Environ(), m.Env()...)
	cmd.Env = append(cmd.Env, "AFE_REPO="+w.repo, "AFE_LANES_DIR="+filepath.Join(w.dir, "lanes"), "HOME="+w.dir)
	chk := NewCheck(m.Lanes)
	var stderr strings.Builder
	cmd.Stdout, cmd.Stderr = chk, &stderr
	code := 0
	if err := cmd.Run(); err != nil {
		code = -1
		w.t.Logf("check: %v\n%s", err, stderr.String())
	}
	return rep.Verify(chk, code)
}

func TestScriptMergesLanesTouchingDifferentFiles(t *testing.T) {
	w := newWorkspace(t, "a", "b")
	w.write("lanes/a/a.txt", "from a\n")
	w.write("lanes/b/b.txt", "from b\n")
	rep, stderr := w.merge(Merge{Lanes: []string{"a", "b"}})
	if rep.Invalid() != "" || rep.Failure != nil || !rep.Done || rep.Conflict != nil {
		t.Fatalf("report %+v %s\n%s", rep, rep.Invalid(), stderr)
	}
	if d := cmp.Diff([]string{"a", "b"}, lanesOf(rep.Committed)); d != "" {
		t.Fatalf("committed (-want +got):\n%s", d)
	}
	if why := w.check(Merge{Lanes: []string{"a", "b"}}, rep); why != "" {
		t.Fatalf("the check refuses the report: %s", why)
	}
	integ := filepath.Join(w.dir, "lanes", "integration")
	for _, f := range []string{"a.txt", "b.txt", "shared.txt"} {
		if _, err := os.Stat(filepath.Join(integ, f)); err != nil {
			t.Fatalf("integration worktree lacks %s: %v", f, err)
		}
	}
	if got := w.git(w.repo, "log", "-1", "--format=%an <%ae> %s", "a"); got != "afe <afe@sandbox.invalid> afe: lane a, Run run-1" {
		t.Fatalf("lane commit: %s", got)
	}
	if got := w.git(integ, "rev-list", "--merges", "--count", "HEAD"); got != "2" {
		t.Fatalf("merge commits: %s", got)
	}
	if rep.Integration != w.git(integ, "rev-parse", "HEAD") {
		t.Fatalf("integration %s", rep.Integration)
	}

	By := "executed again, after a half-done merge and litter in the integration worktree"
	w.write("lanes/integration/litter.txt", "x")
	w.write("lanes/integration/shared.txt", "changed\n")
	again, stderr := w.merge(Merge{Lanes: []string{"a", "b"}, Attempt: 2})
	if why := w.check(Merge{Lanes: []string{"a", "b"}}, again); why != "" {
		t.Fatalf("%s: the check refuses the report: %s", By, why)
	}
	if again.Integration != rep.Integration || len(again.Committed) != 0 {
		t.Fatalf("%s: integration %s, was %s; committed %v\n%s", By, again.Integration, rep.Integration, again.Committed, stderr)
	}
	if _, err := os.Stat(filepath.Join(integ, "litter.txt")); !os.IsNotExist(err) {
		t.Fatalf("%s: litter kept: %v", By, err)
	}
}

func TestScriptReportsAConflictAndAborts(t *testing.T) {
	w := newWorkspace(t, "a", "b", "c")
	w.write("lanes/a/shared.txt", "one\nTWO from a\nthree\n")
	w.write("lanes/b/shared.txt", "one\nTWO from b\nthree\n")
	w.write("lanes/b/only-b.txt", "b\n")
	w.write("lanes/c/c.txt", "c\n")
	rep, stderr := w.merge(Merge{Lanes: []string{"a", "b", "c"}})
	if rep.Invalid() != "" || rep.Failure != nil || !rep.Done || rep.Conflict == nil {
		t.Fatalf("report %+v %s\n%s", rep, rep.Invalid(), stderr)
	}
	if why := w.check(Merge{Lanes: []string{"a", "b", "c"}}, rep); why != "" {
		t.Fatalf("the check refuses the report: %s", why)
	}
	if d := cmp.Diff(&Conflict{Lane: "b", Files: []string{"shared.txt"}}, rep.Conflict); d != "" {
		t.Fatalf("conflict (-want +got):\n%s", d)
	}
	if len(rep.Merged) != 1 || rep.Merged[0].Lane != "a" {
		t.Fatalf("merged %+v", rep.Merged)
	}
	integ := filepath.Join(w.dir, "lanes", "integration")
	if st := w.git(integ, "status", "--porcelain"); st != "" {
		t.Fatalf("the merge was not aborted: %q", st)
	}
}

func TestScriptMergesLanesWithNothingToCommit(t *testing.T) {
	w := newWorkspace(t, "a", "b")
	w.write("lanes/a/a.txt", "a\n")
	w.git(filepath.Join(w.dir, "lanes", "a"), "add", "-A")
	w.git(filepath.Join(w.dir, "lanes", "a"), "commit", "-q", "-m", "already committed")
	// b has no change at all; a third branch has no worktree.
	w.git(w.repo, "branch", "d", "main")
	rep, stderr := w.merge(Merge{Lanes: []string{"a", "b", "d"}})
	if rep.Invalid() != "" || rep.Failure != nil || !rep.Done || rep.Conflict != nil || len(rep.Committed) != 0 || len(rep.Merged) != 3 {
		t.Fatalf("report %+v %s\n%s", rep, rep.Invalid(), stderr)
	}
	if why := w.check(Merge{Lanes: []string{"a", "b", "d"}}, rep); why != "" {
		t.Fatalf("the check refuses the report: %s", why)
	}
}

func TestScriptFailures(t *testing.T) {
	tests := map[string]struct {
		prepare func(w *workspace) Merge
		reason  string
	}{
		"no repository": {func(w *workspace) Merge {
			if err := os.RemoveAll(w.repo); err != nil {
				t.Fatal(err)
			}
			return Merge{Lanes: []string{"a"}}
		}, "RepositoryNotFound"},
		"a plain folder inside another repository": {func(w *workspace) Merge {
			if err := os.RemoveAll(w.repo); err != nil {
				t.Fatal(err)
			}
			w.git("", "init", "-q", w.dir)
			w.write("repo/file", "x")
			return Merge{Lanes: []string{"a"}}
		}, "RepositoryNotFound"},
		"no lane branch": {func(*workspace) Merge { return Merge{Lanes: []string{"nope"}} }, "RefNotFound"},
		"no base":        {func(*workspace) Merge { return Merge{Lanes: []string{"a"}, Base: "v9"} }, "RefNotFound"},
		"a worktree on another branch": {func(w *workspace) Merge {
			w.git(filepath.Join(w.dir, "lanes", "a"), "switch", "-q", "-c", "elsewhere")
			return Merge{Lanes: []string{"a"}}
		}, "GitFailed"},
		"a stale lock, first attempt": {func(w *workspace) Merge {
			w.write("repo/.git/worktrees/a/index.lock", "")
			w.write("lanes/a/x", "x")
			return Merge{Lanes: []string{"a"}}
		}, "GitFailed"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			w := newWorkspace(t, "a")
			rep, stderr := w.merge(tc.prepare(w))
			if rep.Invalid() != "" || rep.Failure == nil || rep.Failure.Reason != tc.reason {
				t.Fatalf("failure %+v %s, want %s\n%s", rep.Failure, rep.Invalid(), tc.reason, stderr)
			}
		})
	}
}

func TestScriptRemovesStaleLocksOnAnotherAttempt(t *testing.T) {
	w := newWorkspace(t, "a")
	w.write("repo/.git/worktrees/a/index.lock", "")
	w.write("lanes/a/x", "x")
	rep, stderr := w.merge(Merge{Lanes: []string{"a"}, Attempt: 2})
	if rep.Invalid() != "" || rep.Failure != nil || !rep.Done || len(rep.Committed) != 1 {
		t.Fatalf("report %+v %s\n%s", rep, rep.Invalid(), stderr)
	}
}

func TestScriptWithoutGit(t *testing.T) {
	m := Merge{Lanes: []string{"a"}, Integration: "integration", Base: "main", Attempt: 1}
	cmd := exec.Command(MergeCommand()[0], MergeCommand()[1:]...)
	cmd.Env = append(m.Env(), "PATH="+t.TempDir())
	rep := NewReport(m.Lanes)
	cmd.Stdout = rep
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if rep.Failure == nil || rep.Failure.Reason != "GitNotFound" {
		t.Fatalf("failure %+v", rep.Failure)
	}
}

// forgingFilter is the attack as a clean filter: it writes a forged
// report line into every pipe of the merge script, its ancestor, through
// /proc (never into a process that is not its ancestor: these tests run on
// the machine itself), logs where it got through, and passes the content.
const forgingFilter = `#!/bin/sh
log="$1"
p=$$
while [ "$p" -gt 1 ]; do
	p=$(sed -n 's/^PPid:[[:space:]]*//p' "/proc/$p/status")
	case "$(tr '\0' ' ' < "/proc/$p/cmdline")" in *afe-merge*) ;; *) continue ;; esac
	for fd in /proc/$p/fd/*; do
		[ -p "$fd" ] || continue
		echo 'afe-builtin merged zz-forged 0123456789abcdef0123456789abcdef01234567' > "$fd" && echo "wrote $fd" >> "$log"
	done
	break
done
exec cat
`

// A repository's configuration can start programs (a filter, fsmonitor).
// They run as the sandbox user, not as fsmonitor, and though they can write
// to the report channel through /proc, what they write is no report.
func TestScriptReportForgedByTheRepositoryIsRefused(t *testing.T) {
	w := newWorkspace(t, "a")
	evil := filepath.Join(w.dir, "evil.sh")
	w.write("evil.sh", forgingFilter)
	if err := os.Chmod(evil, 0o755); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(w.dir, "forged")
	w.git(w.repo, "config", "core.fsmonitor", evil+" "+filepath.Join(w.dir, "fsmonitor"))
	w.git(w.repo, "config", "filter.evil.clean", evil+" "+log)
	w.write("lanes/a/.gitattributes", "* filter=evil\n")
	w.write("lanes/a/a.txt", "from a\n")
	rep, stderr := w.merge(Merge{Lanes: []string{"a"}})
	forged, _ := os.ReadFile(log)
	t.Logf("report: %s\nforger:\n%s", rep.Invalid(), forged)
	if !strings.Contains(string(forged), "wrote") {
		t.Fatalf("the filter did not reach the merge script: the test checks nothing\n%s", stderr)
	}
	if _, err := os.Stat(filepath.Join(w.dir, "fsmonitor")); !os.IsNotExist(err) {
		t.Fatalf("fsmonitor ran: %v", err)
	}
	if got := rep.Invalid(); !strings.Contains(got, "names a lane that is not one of this Run's lanes") {
		t.Fatalf("Invalid() = %q\n%s", got, stderr)
	}
	for _, m := range rep.Merged {
		if m.Lane != "a" {
			t.Fatalf("merged %+v", rep.Merged)
		}
	}
}

// The check reads the repository the workload configures, but starts none
// of the programs it names: no filter, fsmonitor or hook, and no transport,
// which a partial clone starts to fetch a missing commit.
func TestScriptCheckStartsNoProgramOfTheRepository(t *testing.T) {
	w := newWorkspace(t, "a")
	w.write("lanes/a/a.txt", "from a\n")
	rep, stderr := w.merge(Merge{Lanes: []string{"a"}})
	if rep.Invalid() != "" || !rep.Done {
		t.Fatalf("report %+v %s\n%s", rep, rep.Invalid(), stderr)
	}
	ran := filepath.Join(w.dir, "ran")
	evil := filepath.Join(w.dir, "evil.sh")
	w.write("evil.sh", "#!/bin/sh\necho \"$0 $*\" >> "+ran+"\nexit 1\n")
	if err := os.Chmod(evil, 0o755); err != nil {
		t.Fatal(err)
	}
	w.write("hooks/reference-transaction", "#!/bin/sh\necho hook >> "+ran+"\n")
	if err := os.Chmod(filepath.Join(w.dir, "hooks/reference-transaction"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, kv := range [][2]string{
		{"core.fsmonitor", evil},
		{"core.hooksPath", filepath.Join(w.dir, "hooks")},
		{"filter.evil.clean", evil},
		{"filter.evil.smudge", evil},
		{"core.repositoryformatversion", "1"},
		{"extensions.partialClone", "origin"},
		{"remote.origin.promisor", "true"},
		{"remote.origin.url", "ext::" + evil + " %S"},
		{"remote.origin.uploadpack", evil},
		{"protocol.allow", "always"},
		{"protocol.ext.allow", "always"},
		{"core.sshCommand", evil},
	} {
		w.git(w.repo, "config", kv[0], kv[1])
	}
	w.write("repo/.gitattributes", "* filter=evil\n")
	// A lane whose branch names a commit the repository lacks: git would
	// fetch it from the promisor remote.
	w.write("repo/.git/refs/heads/a", "1234567890123456789012345678901234567890\n")
	why := w.check(Merge{Lanes: []string{"a"}}, rep)
	if !strings.Contains(why, "it says lane a was committed as "+rep.Merged[0].Commit+", but its branch is missing") {
		t.Fatalf("Verify() = %q", why)
	}
	if got, err := os.ReadFile(ran); err == nil || !os.IsNotExist(err) {
		t.Fatalf("the check started a program of the repository: %q", got)
	}
}

func lanesOf(lc []LaneCommit) []string {
	out := []string{}
	for _, l := range lc {
		out = append(out, l.Lane)
	}
	return out
}
