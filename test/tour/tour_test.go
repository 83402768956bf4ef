package tour

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"afe.dev/sandbox/test/dockertest"
	"afe.dev/sandbox/test/testenv"
)

// makeRunLine is a command of the tour that starts the controller: `make
// run`, with manager flags in RUN_ARGS or not.
var makeRunLine = regexp.MustCompile(`^(?:RUN_ARGS=(?:"([^"]*)"|'([^']*)'|(\S*))\s+)?make run$`)

// makeRun tells whether the command is `[RUN_ARGS=...] make run`, and the
// flags of its RUN_ARGS, split as make's shell splits them.
func makeRun(code string) ([]string, bool) {
	m := makeRunLine.FindStringSubmatch(code)
	if m == nil {
		return nil, false
	}
	return strings.Fields(m[1] + m[2] + m[3]), true
}

// TestTour runs the README's five-minute tour as written (see the package's
// doc): each `make run` of it (re)starts a control plane and a manager of
// the test's own as the Makefile's run target does, with the test's
// --instance, and every other command runs with bash in the module's root,
// its promise checked (Promised) before the next one runs.
func TestTour(t *testing.T) {
	root, err := testenv.Root()
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	cmds, err := Tour(string(readme))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := makeRun(cmds[0].Code); !ok {
		t.Fatalf("the tour's first command is %q, not `make run`: nothing would serve the commands after it", cmds[0].Code)
	}
	tr := setUp(t, root, cmds)
	began := time.Now()
	for _, c := range cmds {
		tr.step(t, c)
	}
	t.Logf("the tour's %d commands took %s", len(cmds), time.Since(began).Round(time.Millisecond))
}

// step runs one command of the tour and checks what the README promises of
// it; the first broken promise ends the test, as the commands after it
// build on it.
func (tr *tourRun) step(t *testing.T, c Command) {
	t.Helper()
	p := Promised(c, tr.isRemark)
	if flags, ok := makeRun(c.Code); ok {
		tr.restart(t, flags)
		tr.checkRemark(t, c, p.Remark)
		return
	}
	code, out, took, err := tr.sh.run(tr.rewrite(c.Text))
	t.Logf("block %d: %s\n-> exit %d in %s\n%s", c.Block, c.Text, code, took.Round(time.Millisecond), indent(out))
	if err != nil {
		t.Fatalf("block %d: %s: %v", c.Block, c.Code, err)
	}
	if problems := p.Check(code, out); len(problems) > 0 {
		t.Fatalf("block %d: %s does not do what the README says: %s", c.Block, c.Code, strings.Join(problems, "; "))
	}
	tr.checkRemark(t, c, p.Remark)
}

// rewrite points the tour's paths under $PWD/bin at the test's: the control
// plane's state folder for bin/local, the folder with the kubectl plugin
// for bin.
func (tr *tourRun) rewrite(text string) string {
	text = strings.ReplaceAll(text, "$PWD/bin/local", tr.paths.Dir)
	return strings.ReplaceAll(text, "$PWD/bin", tr.bin)
}

func indent(s string) string {
	return "\t" + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n\t")
}

// tourRun is one run of the tour: where its pieces are, the shell its
// commands run in, and the control plane running now.
type tourRun struct {
	root     string
	makefile string
	paths    RunPaths
	vars     map[string]string // ENVTEST_DIR and RUN_RUNTIMES, as make gives them
	bin      string            // the folder with kubectl-afe, for $PWD/bin
	instance string
	log      string // the control plane's and the manager's output
	sh       *shell
	cp       *controlPlane
	made     named
}

// setUp finds what the tour needs (the engine, kubectl, the test control
// plane's binaries, the manager, the plugin and localcp), refuses to run
// when a Docker object the tour names already exists, and registers the
// cleanup of everything the tour makes.
func setUp(t *testing.T, root string, cmds []Command) *tourRun {
	_, skip, err := dockertest.Require()
	if err != nil {
		t.Fatal(err)
	}
	if skip != "" {
		t.Skip(skip)
	}
	for _, tool := range []string{"bash", "kubectl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the tour needs %s: %v", tool, err)
		}
	}
	assets := testenv.RequireAssets(t, "kube-apiserver", "etcd")
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	tr := &tourRun{
		root:     root,
		makefile: string(makefile),
		vars:     map[string]string{"ENVTEST_DIR": assets, "RUN_RUNTIMES": runRuntimes(t)},
		bin:      t.TempDir(),
		instance: fmt.Sprintf("tour-%d", os.Getpid()),
	}
	tr.paths = RunPaths{
		LocalCP: binary(t, root, "AFE_LOCALCP_BIN", "localcp", "./hack/localcp"),
		Manager: binary(t, root, "AFE_MANAGER_BIN", "manager", "./cmd/manager"),
		Dir:     t.TempDir(),
	}
	plugin := binary(t, root, "AFE_KUBECTL_AFE_BIN", "kubectl-afe", "./cmd/kubectl-afe")
	if err := os.Symlink(plugin, filepath.Join(tr.bin, "kubectl-afe")); err != nil {
		t.Fatal(err)
	}
	tr.log = filepath.Join(tr.paths.Dir, "make-run.log")
	tr.made = namedBy(cmds)
	if taken := tr.made.taken(t); len(taken) > 0 {
		t.Fatalf("Docker objects the tour makes or names already exist: %s; the tour would collide with them (remove them if they are left from an earlier run)", strings.Join(taken, ", "))
	}
	t.Cleanup(func() { tr.cleanUp(t) })
	tr.sh = newShell(t, root)
	return tr
}

// runRuntimes is $(RUN_RUNTIMES) as the Makefile computes it: runsc allowed
// beside runc when the engine has it.
func runRuntimes(t *testing.T) string {
	out, err := exec.Command("docker", "info", "--format", "{{range $k, $v := .Runtimes}}{{$k}} {{end}}").Output()
	if err != nil {
		t.Fatalf("docker info: %v", err)
	}
	for _, r := range strings.Fields(string(out)) {
		if r == "runsc" {
			return "--runtimes=runc,runsc"
		}
	}
	return ""
}

// binary is the path in the environment variable, or the package built into
// a temporary folder.
func binary(t *testing.T, root, env, name, pkg string) string {
	if p := os.Getenv(env); p != "" {
		return p
	}
	out := filepath.Join(t.TempDir(), name)
	build := exec.Command("go", "build", "-o", out, pkg)
	build.Dir = root
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build %s (or set %s): %v\n%s", pkg, env, err, b)
	}
	return out
}
