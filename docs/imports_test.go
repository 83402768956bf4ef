package docs

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportRules checks what docs/architecture.md says may not import
// what, with the commands it gives: the rules link no Docker SDK, and
// neither the access API nor the move protocol imports a controller.
// The go command runs it, so go is on the PATH: a failing `go list` fails
// it.
func TestImportRules(t *testing.T) {
	rules := map[string]struct {
		pkgs   []string
		denied string
	}{
		"internal links no Docker SDK":    {[]string{"./internal/..."}, "github.com/docker/docker"},
		"access imports no controller":    {[]string{"./access/..."}, "afe.dev/sandbox/controllers"},
		"move imports no controller":      {[]string{"./move/..."}, "afe.dev/sandbox/controllers"},
		"move imports not the access API": {[]string{"./move/..."}, "afe.dev/sandbox/access"},
	}
	for name, r := range rules {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command("go", append([]string{"list", "-deps"}, r.pkgs...)...)
			cmd.Dir = ".."
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("go list -deps %v: %v", r.pkgs, err)
			}
			for _, p := range strings.Fields(string(out)) {
				if strings.HasPrefix(p, r.denied) {
					t.Errorf("%v imports %s", r.pkgs, p)
				}
			}
		})
	}
}
