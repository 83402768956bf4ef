package tour

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var testPaths = RunPaths{LocalCP: "/t/localcp", Manager: "/t/manager", Dir: "/t/state"}

func TestMakeRunCommand(t *testing.T) {
	makefile := strings.Join([]string{
		"LOCALBIN ?= $(CURDIR)/bin",
		"WS ?= $(LOCALBIN)/local/ws",
		"CP_ARGS = --workspace-root $(WS)",
		"RUN_RUNTIMES ?= $(shell docker info)",
		"run: build ## Run it.",
		"ifeq ($(KUBECONFIG),)",
		"\t@# a comment",
		"ifeq ($(NODES),)",
		"\texec $(LOCALBIN)/localcp --dir $(LOCALBIN)/local $(CP_ARGS) -- $(LOCALBIN)/manager \\",
		"\t\t--ws=$(WS) $(RUN_RUNTIMES) $(RUN_ARGS)",
		"else",
		"\texec $(LOCALBIN)/localcp --nodes $(NODES) -- $(LOCALBIN)/manager",
		"endif",
		"else",
		"\texec $(LOCALBIN)/manager $(RUN_ARGS)",
		"endif",
		"",
		"other:",
		"\texec $(LOCALBIN)/localcp --other",
	}, "\n")
	got, err := MakeRunCommand(makefile, testPaths, map[string]string{"RUN_RUNTIMES": "", "RUN_ARGS": "--x --y"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/t/localcp", "--dir", "/t/state", "--workspace-root", "/t/state/ws", "--", "/t/manager", "--ws=/t/state/ws", "--x", "--y"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("-want +got:\n%s", diff)
	}
}

func TestMakeRunCommandRefuses(t *testing.T) {
	run := "run:\n\texec $(LOCALBIN)/localcp "
	for name, makefile := range map[string]string{
		"no run target":          "other:\n\texec $(LOCALBIN)/localcp --x",
		"the per-node one first": run + "--nodes 3",
		"a variable unknown":     run + "$(NOWHERE)",
		"a shell function":       "SH = $(shell date)\n" + run + "$(SH)",
		"quotes":                 run + "'{node-1}--x'",
		"another program":        "run:\n\texec $(LOCALBIN)/localcpx",
	} {
		if got, err := MakeRunCommand(makefile, testPaths, nil); err == nil {
			t.Errorf("%s: no error, command %q", name, got)
		}
	}
}

// TestMakeRunCommandOfTheMakefile reads the project's own Makefile: its run
// target starts localcp with the state folder, the CRDs and the manager
// after "--", the flags of RUN_ARGS last.
func TestMakeRunCommandOfTheMakefile(t *testing.T) {
	makefile, err := os.ReadFile(filepath.Join("..", "..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := MakeRunCommand(string(makefile), testPaths,
		map[string]string{"ENVTEST_DIR": "/t/assets", "RUN_RUNTIMES": "", "RUN_ARGS": "--last"})
	if err != nil {
		t.Fatal(err)
	}
	line := strings.Join(got, " ")
	for _, want := range []string{"/t/localcp --assets /t/assets --dir /t/state --crds config/crd/bases", " -- /t/manager ", "--workspace-root=/t/state/"} {
		if !strings.Contains(line, want) {
			t.Errorf("the command %q lacks %q", line, want)
		}
	}
	if got[len(got)-1] != "--last" {
		t.Errorf("RUN_ARGS is not last in %q", line)
	}
}
