package tour

import (
	"bufio"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/test/dockertest"
)

// named is what the tour calls by a fixed name: the Docker network and
// containers its docker commands make, and the Sandboxes, Tickets and
// SandboxPools it names in namespace default, whose Docker objects are
// afe-default.<name>... whichever controller makes them.
type named struct {
	networks, containers, objects []string
}

var (
	networkCreate = regexp.MustCompile(`\bdocker network create (\S+)`)
	containerName = regexp.MustCompile(`\s--name[ =](\S+)`)
	objectRef     = regexp.MustCompile(`\b(?:sandbox|ticket|sbxpool|sandboxpool)/([a-z0-9][a-z0-9.-]*)`)
)

// namedBy reads the names out of the tour's commands.
func namedBy(cmds []Command) named {
	var n named
	for _, c := range cmds {
		if m := networkCreate.FindStringSubmatch(c.Code); m != nil {
			n.networks = append(n.networks, m[1])
		}
		if m := containerName.FindStringSubmatch(c.Code); m != nil && strings.HasPrefix(c.Code, "docker run") {
			n.containers = append(n.containers, m[1])
		}
		for _, m := range objectRef.FindAllStringSubmatch(c.Code, -1) {
			n.objects = append(n.objects, m[1])
		}
	}
	return n
}

// taken lists the Docker objects (containers, volumes, networks, by any
// owner) that have a name of the tour: one it makes itself, or one a
// controller makes for an object it names.
func (n named) taken(t *testing.T) []string {
	t.Helper()
	var taken []string
	for _, kind := range []string{"container ls -a", "volume ls", "network ls"} {
		args := append(strings.Fields(kind), "--format", "{{.Name}}")
		if kind == "container ls -a" {
			args[len(args)-1] = "{{.Names}}"
		}
		out, err := exec.Command("docker", args...).Output()
		if err != nil {
			t.Fatalf("docker %s: %v", strings.Join(args, " "), err)
		}
		for _, name := range strings.Fields(string(out)) {
			if n.claims(name) {
				taken = append(taken, strings.Fields(kind)[0]+"/"+name)
			}
		}
	}
	return taken
}

// claims tells whether a Docker object's name is one of the tour's.
func (n named) claims(name string) bool {
	for _, fixed := range append(append([]string{}, n.networks...), n.containers...) {
		if name == fixed {
			return true
		}
	}
	for _, o := range n.objects {
		if strings.HasPrefix(name, "afe-default."+o) {
			return true
		}
	}
	return false
}

// cleanUp stops the control plane and removes every Docker object the tour
// made: the manager's by its --instance label, the tour's own by their
// names (setUp made sure none of them existed before). What is left is an
// error.
func (tr *tourRun) cleanUp(t *testing.T) {
	if t.Failed() {
		t.Logf("make run's output (%s), its end:\n%s", tr.log, tail(tr.log, 40))
	}
	if tr.cp != nil {
		if err := tr.cp.stop(); err != nil {
			t.Error(err)
		}
		tr.cp = nil
	}
	tr.unmountLeft(t)
	label := afev1.LabelController + "=" + tr.instance
	dockertest.RemoveAll(label)
	for _, c := range tr.made.containers {
		_ = exec.Command("docker", "rm", "-f", c).Run()
	}
	for _, n := range tr.made.networks {
		_ = exec.Command("docker", "network", "rm", n).Run()
	}
	left, err := dockertest.Objects(label)
	if err != nil {
		t.Error(err)
	}
	left = append(left, tr.made.taken(t)...)
	if len(left) > 0 {
		t.Errorf("the tour left Docker objects behind after its cleanup: %s", strings.Join(left, ", "))
	}
}

// unmountLeft unmounts what is still mounted under the control plane's
// folder (localcp mounts the workspace root there and unmounts it when it
// ends): a mount left is an error of make run's, and would keep the folder
// from being removed.
func (tr *tourRun) unmountLeft(t *testing.T) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Error(err)
		return
	}
	defer func() { _ = f.Close() }()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) > 4 && strings.HasPrefix(fields[4], tr.paths.Dir+"/") {
			t.Errorf("%s is still mounted after make run ended", fields[4])
			if err := syscall.Unmount(fields[4], 0); err != nil {
				t.Errorf("unmount %s: %v", fields[4], err)
			}
		}
	}
}
