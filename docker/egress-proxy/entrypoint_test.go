package egressproxy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// check runs the entrypoint's --check of the configuration.
func check(config string) (stderr string, code int) {
	cmd := exec.Command("sh", "entrypoint.sh", "--check")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "AFE_EGRESS_CONFIG=" + config}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	}
	return errb.String(), code
}

// The entrypoint starts squid only with a whole configuration: framed by
// the header and the trailer of one ID, of printable ASCII lines, none
// empty. What squid admits is the controller's code's (internal/egress):
// the entrypoint decides none of it.
func TestEntrypointRefusesAConfigurationNotWhole(t *testing.T) {
	_, c := policy(t, "example.com,.pypi.org", false, "172.17.0.1")
	if errs, code := check(c.Text); code != 0 {
		t.Fatalf("a rendered configuration refused: %d %s", code, errs)
	}
	body := strings.TrimPrefix(c.Text, "# afe-allowlist "+c.ID+"\n")
	for name, text := range map[string]string{
		"empty":             "",
		"cut":               c.Text[:len(c.Text)/2],
		"cut at a line":     c.Text[:strings.LastIndex(strings.TrimSuffix(c.Text, "\n"), "\n")],
		"no header":         body,
		"another trailer":   strings.Replace(c.Text, "-end "+c.ID, "-end 0"+c.ID, 1),
		"an ID not hex":     strings.ReplaceAll(c.Text, c.ID, "XY"),
		"an ID too long":    strings.ReplaceAll(c.Text, c.ID, strings.Repeat("a", 65)),
		"a tab":             strings.Replace(c.Text, "http_port 3128", "http_port\t3128", 1),
		"a carriage return": strings.Replace(c.Text, "http_port 3128", "http_port 3128\r", 1),
		"not ASCII":         strings.Replace(c.Text, "example.com", "exаmple.com", 1),
		"an empty line":     strings.Replace(c.Text, "\nhttp_port", "\n\nhttp_port", 1),
		"over 64 KiB":       strings.Replace(c.Text, "\nhttp_port", "\n#"+strings.Repeat("x", 65536)+"\nhttp_port", 1),
	} {
		t.Run(name, func(t *testing.T) {
			if errs, code := check(text); code != 64 || !strings.Contains(errs, "afe-egress-proxy: AFE_EGRESS_CONFIG") {
				t.Fatalf("code %d, stderr %q", code, errs)
			}
		})
	}
}

// The listener takes a request only whole, renames the new file over
// squid's (never writing squid's own), tells squid (here a stand-in that
// ignores SIGHUP) to read it, and answers with the nonce; it refuses a
// request that is not whole, leaving the file as it was, and ignores a
// line that is not a request. Changes back to back each leave a whole
// file.
func TestEntrypointTakesARequestWhole(t *testing.T) {
	dir := t.TempDir()
	squid := exec.Command("sh", "-c", "trap '' HUP; exec sleep 60")
	if err := squid.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = squid.Process.Kill(); _ = squid.Wait() })
	if err := os.WriteFile(filepath.Join(dir, "squid.pid"), []byte(fmt.Sprintf("%d\n", squid.Process.Pid)), 0o600); err != nil {
		t.Fatal(err)
	}
	listen := exec.Command("sh", "entrypoint.sh", "--listen")
	listen.Env = []string{"PATH=" + os.Getenv("PATH"), "TMPDIR=" + dir}
	stdin, err := listen.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := listen.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := listen.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stdin.Close(); _ = listen.Wait() })
	answers := bufio.NewScanner(stderr)
	answers.Buffer(nil, 1<<20)
	// request writes the line and returns the answer to the nonce ("" for
	// none before the next line, the marker's refusal).
	request := func(nonce, line string) string {
		t.Helper()
		if _, err := fmt.Fprintf(stdin, "%s\nafe-egress-config ffff 1 x\n", line); err != nil {
			t.Fatal(err)
		}
		answer := ""
		for answers.Scan() {
			l := answers.Text()
			if strings.HasSuffix(l, " ffff") {
				return answer
			}
			if strings.HasSuffix(l, " "+nonce) {
				answer = strings.TrimSuffix(l, " "+nonce)
			}
		}
		t.Fatal("the listener ended")
		return ""
	}
	conf := func() string {
		b, _ := os.ReadFile(filepath.Join(dir, "squid.conf"))
		return string(b)
	}
	deadline := time.Now().Add(10 * time.Second)
	var last string
	for i := range 5 {
		_, c := policy(t, fmt.Sprintf("a%d.example.com", i), i%2 == 0)
		if got := request("a1", c.Request("a1")); got != "afe-egress-proxy: allowlist "+c.ID+" taken" {
			t.Fatalf("change %d: %q", i, got)
		}
		if conf() != c.Text {
			t.Fatalf("change %d: squid's file is not the text:\n%s", i, conf())
		}
		last = c.Text
	}
	_, c := policy(t, "other.example.com", false)
	text := strings.ReplaceAll(c.Text, "\n", "\t")
	for name, line := range map[string]string{
		"cut":            fmt.Sprintf("afe-egress-config b2 %d %s", len(text)/2, text[:len(text)/2]),
		"another length": fmt.Sprintf("afe-egress-config b2 %d %s", len(text)-1, text),
		"no trailer":     fmt.Sprintf("afe-egress-config b2 %d %s", len(text)-len(trailerTab(c.ID)), strings.TrimSuffix(text, trailerTab(c.ID))),
	} {
		if got := request("b2", line); got != "afe-egress-proxy: allowlist refused" {
			t.Fatalf("%s: %q", name, got)
		}
		if conf() != last {
			t.Fatalf("%s: squid's file changed", name)
		}
	}
	for _, line := range []string{"afe-egress-config", "afe-egress-config B2 5 hello", "afe-egress-config b2 x hello", "afe-allowlist b2 aa 1 a.com -", ""} {
		if got := request("b2", line); got != "" {
			t.Fatalf("%q answered %q", line, got)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Fatalf("files left beside squid's: %v", entries)
	}
	if time.Now().After(deadline) {
		t.Fatal("the listener took over 10 s")
	}
}

func trailerTab(id string) string { return "# afe-allowlist-end " + id + "\t" }
