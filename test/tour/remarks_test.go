package tour

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/test/dockertest"
)

// remarks are the tour's comments that say something other than the
// command's output, each with how the test checks it; nil for an aside
// that the commands after it check (the egress flag that lets the demo
// server be reached, the wait for a pool's members). A comment of the tour that is neither a remark here
// nor a promise of output (Promised) is read as output, and fails the test
// where the output lacks it: a new remark must be added here.
var remarks = map[string]func(*tourRun, Command) error{
	"make kubectl-afe first":                         (*tourRun).pluginOnPath,
	"removes the container and the workspace volume": (*tourRun).objectsGone,
	"nothing is left":                                (*tourRun).objectsGone,
	"private: the test server has a private address": nil,
	"the members are made in the background":         nil,
}

func (tr *tourRun) isRemark(comment string) bool {
	_, ok := remarks[comment]
	return ok
}

// checkRemark checks what the remark on c says, when it is checkable.
func (tr *tourRun) checkRemark(t *testing.T, c Command, remark string) {
	t.Helper()
	check := remarks[remark]
	if AppliedField.MatchString(remark) {
		check = (*tourRun).appliedField
	}
	if remark == "" || check == nil {
		return
	}
	if err := check(tr, c); err != nil {
		t.Fatalf("block %d: %s: the README says %q, but %v", c.Block, c.Code, remark, err)
	}
}

// pluginOnPath checks that the PATH the command exported finds the
// kubectl plugin the test gave as bin/kubectl-afe.
func (tr *tourRun) pluginOnPath(Command) error {
	code, out, _, err := tr.sh.run("command -v kubectl-afe")
	if err != nil {
		return err
	}
	if want := filepath.Join(tr.bin, "kubectl-afe"); code != 0 || strings.TrimSpace(out) != want {
		return fmt.Errorf("kubectl-afe on its PATH is %q (exit %d), not %s", strings.TrimSpace(out), code, want)
	}
	return nil
}

// objectsGone checks that no Docker object of the manager's is left for
// the sandbox or ticket the command names (the last kind/name in it), by
// the afe.ticket label: the ticket's name, or the sandbox's when it has
// none.
func (tr *tourRun) objectsGone(c Command) error {
	refs := objectRef.FindAllStringSubmatch(c.Code, -1)
	if len(refs) == 0 {
		return fmt.Errorf("the command names no sandbox or ticket")
	}
	name := refs[len(refs)-1][1]
	left, err := dockertest.Objects(afev1.LabelController + "=" + tr.instance + "," + afev1.LabelTicket + "=" + name)
	if err != nil {
		return err
	}
	if len(left) > 0 {
		return fmt.Errorf("%s still has %s", name, strings.Join(left, ", "))
	}
	return nil
}

var appliedFile = regexp.MustCompile(`\s-f (\S+)`)

// appliedField checks a remark "field: [list]" on `kubectl apply -f FILE`:
// the object in FILE has that list in its spec's field.
func (tr *tourRun) appliedField(c Command) error {
	m := appliedFile.FindStringSubmatch(c.Code)
	if m == nil || m[1] == "-" {
		return fmt.Errorf("the command applies no file")
	}
	b, err := os.ReadFile(filepath.Join(tr.root, m[1]))
	if err != nil {
		return err
	}
	var obj struct {
		Spec map[string]any `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &obj); err != nil {
		return fmt.Errorf("%s: %w", m[1], err)
	}
	r := AppliedField.FindStringSubmatch(strings.TrimSpace(parenthesis.ReplaceAllString(c.Comment, "")))
	var want any
	if err := yaml.Unmarshal([]byte(r[2]), &want); err != nil {
		return fmt.Errorf("the remark's list %s: %w", r[2], err)
	}
	if diff := cmp.Diff(want, obj.Spec[r[1]]); diff != "" {
		return fmt.Errorf("%s's spec.%s differs (-README +file):\n%s", m[1], r[1], diff)
	}
	return nil
}
