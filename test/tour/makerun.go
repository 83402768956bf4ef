package tour

import (
	"fmt"
	"regexp"
	"strings"

	"afe.dev/sandbox/test/testenv"
)

// RunPaths are where the pieces `make run` finds under $(LOCALBIN) are for
// the test: the binaries, and the folder of the control plane's state
// (bin/local for `make run`).
type RunPaths struct {
	LocalCP, Manager, Dir string
}

var makeVar = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// MakeRunCommand is the command line the Makefile's run target runs without
// KUBECONFIG and NODES (`exec $(LOCALBIN)/localcp ... -- $(LOCALBIN)/manager
// ...`), read from the Makefile's text so that the test starts the control
// plane and the manager the way `make run` does, whatever flags it gains.
// $(LOCALBIN)'s localcp, manager and local are replaced by paths; vars
// gives the values of variables the test sets (RUN_ARGS, ENVTEST_DIR,
// RUN_RUNTIMES, computed with a shell function in the Makefile); the others
// are read from the Makefile's own assignments. A variable found in
// neither, a $(shell ...) or quotes in the command are errors: the test
// would not start what `make run` starts.
func MakeRunCommand(makefile string, paths RunPaths, vars map[string]string) ([]string, error) {
	recipe, err := runRecipe(makefile)
	if err != nil {
		return nil, err
	}
	line, err := expand(recipe, makefile, paths, vars, 0)
	if err != nil {
		return nil, err
	}
	if strings.ContainsAny(line, `'"`) {
		return nil, fmt.Errorf("the run target's command has quotes, which the test does not split: %s", line)
	}
	words := strings.Fields(line)
	if len(words) < 2 || words[0] != "exec" || words[1] != paths.LocalCP {
		return nil, fmt.Errorf("the run target's command is not `exec $(LOCALBIN)/localcp ...`: %s", line)
	}
	return words[1:], nil
}

// runRecipe is the first command of the run target that runs localcp, its
// continued lines joined, without --nodes (the per-node branch).
func runRecipe(makefile string) (string, error) {
	lines := strings.Split(makefile, "\n")
	in := false
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case strings.HasPrefix(l, "run:"):
			in = true
		case !in:
		case strings.HasPrefix(l, "\t") && strings.HasPrefix(strings.TrimSpace(l), "exec $(LOCALBIN)/localcp"):
			cmd := strings.TrimSuffix(strings.TrimSpace(l), `\`)
			for strings.HasSuffix(l, `\`) && i+1 < len(lines) {
				i++
				l = lines[i]
				cmd += " " + strings.TrimSuffix(strings.TrimSpace(l), `\`)
			}
			if strings.Contains(cmd, "--nodes") {
				return "", fmt.Errorf("the run target's first localcp command is the per-node one: %s", cmd)
			}
			return cmd, nil
		case strings.HasPrefix(l, "\t"), l == "", isConditional(l):
		default:
			in = false
		}
	}
	return "", fmt.Errorf("the Makefile's run target has no command `exec $(LOCALBIN)/localcp ...`")
}

func isConditional(l string) bool {
	for _, d := range []string{"ifeq", "ifneq", "ifdef", "ifndef", "else", "endif"} {
		if strings.HasPrefix(l, d) {
			return true
		}
	}
	return false
}

// expand replaces the Makefile's variables in s (see MakeRunCommand);
// depth bounds variables defined by one another.
func expand(s, makefile string, paths RunPaths, vars map[string]string, depth int) (string, error) {
	if depth > 8 {
		return "", fmt.Errorf("the Makefile's variables nest too deep: %s", s)
	}
	s = strings.ReplaceAll(s, "$(LOCALBIN)/localcp", paths.LocalCP)
	s = strings.ReplaceAll(s, "$(LOCALBIN)/manager", paths.Manager)
	s = strings.ReplaceAll(s, "$(LOCALBIN)/local", paths.Dir)
	var err error
	out := makeVar.ReplaceAllStringFunc(s, func(ref string) string {
		name := makeVar.FindStringSubmatch(ref)[1]
		if v, ok := vars[name]; ok {
			return v
		}
		def, ok := assignment(makefile, name)
		if !ok || strings.Contains(def, "$(shell") {
			if err == nil {
				err = fmt.Errorf("the run target uses $(%s), which the test cannot give as make would", name)
			}
			return ref
		}
		v, e := expand(def, makefile, paths, vars, depth+1)
		if e != nil && err == nil {
			err = e
		}
		return v
	})
	return out, err
}

// assignment is the value the Makefile gives the variable ("NAME = v",
// with =, ?= or :=), if it does.
func assignment(makefile, name string) (string, bool) {
	for _, l := range strings.Split(makefile, "\n") {
		if v, ok := testenv.MakeVariable(l, name); ok {
			return v, true
		}
	}
	return "", false
}
