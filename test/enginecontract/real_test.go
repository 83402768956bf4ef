package enginecontract

import (
	"os/exec"
	"strings"
	"testing"

	"afe.dev/sandbox/test/dockertest"
)

// TestRealEngine runs the contract against the real engine: skipped when
// Docker is absent, a failure when it is absent under CI.
func TestRealEngine(t *testing.T) {
	engine, skip, err := dockertest.Require()
	if err != nil {
		t.Fatal(err)
	}
	if skip != "" {
		t.Skip(skip)
	}
	t.Cleanup(func() { _ = engine.Close() })
	Run(t, engine, Harness{
		Image: dockertest.TestImage,
		Kill: func(t *testing.T, container string) {
			t.Helper()
			dockerCLI(t, "kill", container)
			dockerCLI(t, "wait", container)
		},
		WriteFile: func(t *testing.T, volume, path, content string) {
			t.Helper()
			dockerCLI(t, "run", "--rm", "--network", "none", "-v", volume+":/w", dockertest.TestImage,
				"sh", "-c", `printf %s "$1" > "/w/$2"`, "sh", content, path)
		},
		ReadFile: func(t *testing.T, volume, path string) string {
			t.Helper()
			return dockerCLI(t, "run", "--rm", "--network", "none", "-v", volume+":/w", dockertest.TestImage,
				"sh", "-c", `cat "/w/$1" 2>/dev/null || true`, "sh", path)
		},
	})
}

func dockerCLI(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("docker", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("docker %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}
