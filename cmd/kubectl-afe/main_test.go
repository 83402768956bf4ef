package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// kubeconfigNowhere is a kubeconfig whose server refuses connections: a
// command that parsed gets as far as connecting.
func kubeconfigNowhere(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u, namespace: ns}}]
current-context: x
`
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// execute runs the plugin with stdin /dev/null, and returns what it
// printed on stdout and stderr together.
func execute(args ...string) (string, error) {
	devNull, _ := os.Open(os.DevNull)
	defer func() { _ = devNull.Close() }()
	return executeWith(devNull, args...)
}

// executeWith runs the plugin with this stdin.
func executeWith(stdin io.Reader, args ...string) (string, error) {
	var out bytes.Buffer
	root := newRoot(genericiooptions.IOStreams{In: stdin, Out: &out, ErrOut: &out})
	root.SetOut(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

func TestFlagsAnywhereBeforeTheDash(t *testing.T) {
	kc := kubeconfigNowhere(t)
	tests := map[string][]string{
		"exec -i before the sandbox":      {"exec", "-i", "box", "--", "cat"},
		"exec -i after the sandbox":       {"exec", "box", "-i", "--", "cat"},
		"kubectl's flags after a command": {"exec", "box", "-n", "other", "--as", "alice", "--", "cat"},
		"logs RUN -f":                     {"logs", "r", "-f"},
		"run with flags around":           {"run", "--timeout", "3", "box", "--workdir", "/workspace", "--", "sh", "-c", "echo -n x"},
		"telemetry -o json":               {"telemetry", "--ticket", "t", "-o", "json"},
	}
	for name, args := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel() // an exec tries a refused connection again for 30 s
			_, err := execute(append([]string{"--kubeconfig", kc, "--request-timeout", "2s"}, args...)...)
			if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
				t.Fatalf("want an error connecting to 127.0.0.1:1 (the arguments parsed), got %v", err)
			}
		})
	}
}

func TestHelpNeedsNoKubeconfig(t *testing.T) {
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "missing"))
	out, err := execute("help")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "exec") || !strings.Contains(out, "--as") {
		t.Errorf("help lists no exec or no --as:\n%s", out)
	}
}

// The plugin takes kubectl's IOStreams: stdin is any reader, and asked
// whether it is a terminal only when it has a file descriptor
// (TestExecOnATerminal gives it one that is).
func TestStdinIsAnyReader(t *testing.T) {
	kc := kubeconfigNowhere(t)
	_, err := executeWith(strings.NewReader("input\n"), "--kubeconfig", kc, "exec", "box", "-t", "--", "sh")
	if err == nil || !strings.Contains(err.Error(), "-t needs stdin to be a terminal") {
		t.Fatalf("want exec -t refused on a reader, got %v", err)
	}
	if _, terminal := terminalOf(strings.NewReader("")); terminal {
		t.Error("a reader without a file descriptor is a terminal")
	}
}

// The plugin has no --instance (the manager serving the access API reaches
// only the containers of its own instance): given, it is refused.
func TestNoInstanceFlag(t *testing.T) {
	for _, args := range [][]string{{"--instance", "e2e", "telemetry", "box"}, {"exec", "box", "--instance=e2e", "--", "true"}} {
		if _, err := execute(args...); err == nil || !strings.Contains(err.Error(), "unknown flag: --instance") {
			t.Errorf("%v: want unknown flag: --instance, got %v", args, err)
		}
	}
}
