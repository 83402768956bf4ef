// Package egressproxy tests the egress proxy image: its entrypoint's checks
// of the configuration it is given (run with sh, no Docker needed), and the
// built image running squid with configurations the controller's code
// renders (internal/egress) against test servers of its own.
package egressproxy

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"afe.dev/sandbox/internal/egress"
	"afe.dev/sandbox/internal/egresslog"
	"afe.dev/sandbox/internal/hostaddrs"
	"afe.dev/sandbox/test/dockertest"
	"afe.dev/sandbox/test/testenv"
)

// proxyImage is the image under test: AFE_PROXY_IMAGE, so that a candidate
// built under another tag can be tried beside the one other tests use, or
// afe/egress-proxy:dev (make images).
var proxyImage = func() string {
	if img := os.Getenv("AFE_PROXY_IMAGE"); img != "" {
		return img
	}
	return "afe/egress-proxy:dev"
}()

// env is the proxy's environment for the allowlist (comma-separated
// entries, as the CRD writes them), whether private destinations pass,
// and the addresses always refused: squid's configuration rendered by the
// controller's code (internal/egress), as the controller creates a proxy.
func env(t *testing.T, hosts string, private bool, deny ...string) []string {
	t.Helper()
	p, c := policy(t, hosts, private, deny...)
	return c.Env(p)
}

// policy is the policy of env's arguments, and its rendering.
func policy(t *testing.T, hosts string, private bool, deny ...string) (egress.Policy, egress.Config) {
	t.Helper()
	var entries []string
	if hosts != "" {
		entries = strings.Split(hosts, ",")
	}
	list, err := egress.ParseHosts(entries)
	if err != nil {
		t.Fatal(err)
	}
	denied, err := egress.ParseDenied(deny)
	if err != nil {
		t.Fatal(err)
	}
	p := egress.Policy{Hosts: list, AllowPrivate: private, DenyIPs: denied}
	c, err := p.Render()
	if err != nil {
		t.Fatal(err)
	}
	return p, c
}

// harness: a network of the test's own with a web server known as
// allowed.test on a private address, and a client container on it.
type harness struct {
	t       *testing.T
	label   string
	network string
}

func newHarness(t *testing.T) *harness {
	_, skip, err := dockertest.Require()
	if err != nil {
		t.Fatal(err)
	}
	if skip != "" {
		t.Skip(skip)
	}
	if err := exec.Command("docker", "image", "inspect", proxyImage).Run(); err != nil {
		if testenv.DockerRequired() {
			t.Fatalf("%s is missing (make images)", proxyImage)
		}
		t.Skipf("%s is missing (make images)", proxyImage)
	}
	id := fmt.Sprintf("afe-proxytest-%d", time.Now().UnixNano())
	h := &harness{t: t, label: "afe.test=" + id, network: id}
	t.Cleanup(func() { dockertest.RemoveAll(h.label) })
	h.docker("network", "create", "--label", h.label, h.network)
	h.docker("run", "-d", "--label", h.label, "--name", id+"-web", "--network", h.network,
		"--network-alias", "allowed.test", "--network-alias", "www.allowed.test",
		dockertest.TestImage, "sh", "-c", "mkdir -p /www && echo web-ok > /www/index.html && httpd -p 8080 -h /www && exec httpd -f -p 80 -h /www")
	h.docker("run", "-d", "--label", h.label, "--name", id+"-client", "--network", h.network, "--user", "1000:1000",
		dockertest.TestImage, "sleep", "600")
	return h
}

func (h *harness) docker(args ...string) string {
	h.t.Helper()
	out, err := exec.Command("docker", args...).CombinedOutput()
	if err != nil {
		h.t.Fatalf("docker %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// proxy starts a hardened proxy with the environment and waits until it
// answers.
func (h *harness) proxy(env ...string) string {
	h.t.Helper()
	return h.startProxy([]string{"--network", h.network}, env...)
}

// startProxy is proxy with docker run arguments of its own (the network
// among them).
func (h *harness) startProxy(dockerArgs []string, env ...string) string {
	h.t.Helper()
	name := fmt.Sprintf("%s-proxy-%d", h.network, time.Now().UnixNano())
	// -i: the engine holds its stdin open, as the controller makes it.
	args := append([]string{"run", "-d", "-i", "--label", h.label, "--name", name,
		"--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--read-only", "--tmpfs", "/tmp"}, dockerArgs...)
	for _, e := range env {
		args = append(args, "-e", e)
	}
	h.docker(append(args, proxyImage)...)
	deadline := time.Now().Add(20 * time.Second)
	for exec.Command("docker", "exec", name, "afe-proxy-probe").Run() != nil {
		if time.Now().After(deadline) {
			logs, _ := exec.Command("docker", "logs", name).CombinedOutput()
			h.t.Fatalf("proxy does not answer: %s", logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return name
}

// decisions reads a proxy's log as the controller does, one decision of
// the sandbox's a line ("METHOD HOST:PORT DECISION REASON STATUS"; the
// probe's, from loopback, left out).
func decisions(logs string) []string {
	var out []string
	for _, line := range strings.Split(logs, "\n") {
		d, err := egresslog.Parse(line)
		if err == nil && !net.ParseIP(d.Client).IsLoopback() {
			out = append(out, fmt.Sprintf("%s %s:%d %s %s %s", d.Method, d.Host, d.Port, d.Decision, d.Reason, d.Status))
		}
	}
	return out
}

// get fetches url through the proxy from the client container.
func (h *harness) get(proxy, url string) (string, error) {
	out, err := exec.Command("docker", "exec", "-e", "http_proxy=http://"+proxy+":3128", h.network+"-client",
		"timeout", "5", "wget", "-q", "-O-", url).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func TestProxyImage(t *testing.T) {
	h := newHarness(t)

	open := h.proxy(env(t, "allowed.test", true)...)
	if out, err := h.get(open, "http://allowed.test/"); err != nil || out != "web-ok" {
		t.Fatalf("allowed host: %v %q", err, out)
	}
	if out, err := h.get(open, "http://www.allowed.test/"); err == nil {
		t.Fatalf("a subdomain of a host without a leading dot was allowed: %q", out)
	}
	if out, err := h.get(open, "http://allowed.test:8080/"); err == nil || !strings.Contains(out, "403") {
		t.Fatalf("plain HTTP to port 8080 must be refused: %v %q", err, out)
	}
	// squid never originates TLS (its default CAs are off): an https:// URL
	// in a plain request is refused before any connection is made.
	raw := exec.Command("docker", "exec", h.network+"-client", "sh", "-c",
		"printf 'GET https://allowed.test/ HTTP/1.1\\r\\nHost: allowed.test\\r\\nConnection: close\\r\\n\\r\\n' | timeout 5 nc "+open+" 3128")
	if out, _ := raw.CombinedOutput(); !strings.HasPrefix(string(out), "HTTP/1.1 403") {
		t.Fatalf("a plain request for an https:// URL must be refused with 403: %q", out)
	}
	// A connection closed before it sent a request is squid's "empty"
	// line (recorded in aggregate by the follower).
	h.docker("exec", h.network+"-client", "sh", "-c", "timeout 5 nc "+open+" 3128 </dev/null")
	if uid := h.docker("exec", open, "id", "-u"); uid == "0" {
		t.Fatal("the proxy runs as root")
	}
	// The engine copies the proxy's stdout into its log a little later.
	// Each decision reads as the controller reads it, with the reason of
	// the rule that denied.
	for _, want := range []string{"GET allowed.test:80 allowed  TCP_MISS/200", "GET www.allowed.test:80 denied host TCP_DENIED/403",
		"GET allowed.test:8080 denied port TCP_DENIED/403", "- " + egresslog.EmptyURL + ":0 denied empty NONE_NONE/000"} {
		deadline := time.Now().Add(10 * time.Second)
		for logs := h.docker("logs", open); !slices.Contains(decisions(logs), want); logs = h.docker("logs", open) {
			if time.Now().After(deadline) {
				t.Fatalf("decision %q not logged:\n%s\nread as %q", want, logs, decisions(logs))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	domain := h.proxy(env(t, ".allowed.test", true)...)
	if out, err := h.get(domain, "http://www.allowed.test/"); err != nil || out != "web-ok" {
		t.Fatalf(".domain should admit a subdomain: %v %q", err, out)
	}

	// Without private destinations allowed an allowed name on a private address
	// is refused.
	private := h.proxy(env(t, "allowed.test", false)...)
	if out, err := h.get(private, "http://allowed.test/"); err == nil || !strings.Contains(out, "403") {
		t.Fatalf("a private destination must be refused: %v %q", err, out)
	}
	// Denied addresses are refused even when private ones are allowed.
	webIP := dockertest.ContainerIP(h.network+"-web", h.network)
	hostDenied := h.proxy(env(t, "allowed.test", true, webIP)...)
	if out, err := h.get(hostDenied, "http://allowed.test/"); err == nil || !strings.Contains(out, "403") {
		t.Fatalf("a denied address must be refused: %v %q", err, out)
	}
}

// Allowed names that resolve to the cloud metadata address or to the
// proxy's own loopback are refused. The proxy sits on an internal network
// of the test's own: were the rule missing, its connection would find no
// route out (a timeout or 503), never the address itself.
func TestProxyImageRefusesAllowedNamesOnLinkLocalAndLoopback(t *testing.T) {
	h := newHarness(t)
	internal := h.network + "-int"
	h.docker("network", "create", "--internal", "--label", h.label, internal)
	client := internal + "-client"
	h.docker("run", "-d", "--label", h.label, "--name", client, "--network", internal, "--user", "1000:1000",
		dockertest.TestImage, "sleep", "600")
	proxy := h.startProxy([]string{"--network", internal,
		"--add-host", "metadata.test:169.254.169.254", "--add-host", "loop.test:127.0.0.1"},
		env(t, "metadata.test,loop.test", false)...)
	for _, url := range []string{"http://metadata.test/latest/meta-data/", "http://loop.test/"} {
		out, err := exec.Command("docker", "exec", "-e", "http_proxy=http://"+proxy+":3128", client,
			"timeout", "5", "wget", "-q", "-O-", url).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "403") {
			t.Errorf("%s must be refused with 403: %v %q", url, err, out)
		}
	}
}

// A service on the engine's host, reached through the proxy by an allowed
// name that resolves to the gateway of the proxy's network, on port 80:
// refused for the gateway's address (denied, as the controller's policy
// denies it) even when private addresses are allowed. Positive
// controls first: the service answers a container directly, and a proxy
// without the rule.
func TestProxyImageRefusesTheHostByItsGateway(t *testing.T) {
	h := newHarness(t)
	gw := h.docker("network", "inspect", "-f", "{{range .IPAM.Config}}{{.Gateway}}{{end}}", h.network)
	if gw == "" {
		t.Fatalf("network %s has no gateway", h.network)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(gw, "80"))
	if err != nil {
		t.Fatalf("listen on the gateway %s:80 (a host address of the test's own network): %v", gw, err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		_ = http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = fmt.Fprint(w, "host-secret")
		}))
	}()
	if out, err := exec.Command("docker", "exec", h.network+"-client", "timeout", "5", "wget", "-q", "-O-", "http://"+gw+"/").CombinedOutput(); err != nil || string(out) != "host-secret" {
		t.Fatalf("control: the host service does not answer a container at %s:80: %v %q", gw, err, out)
	}
	hostArg := []string{"--network", h.network, "--add-host", "gw.test:" + gw}
	open := h.startProxy(hostArg, env(t, "gw.test", true)...)
	if out, err := h.get(open, "http://gw.test/"); err != nil || out != "host-secret" {
		t.Fatalf("control: a proxy without the host rule does not reach it: %v %q", err, out)
	}
	for name, env := range map[string][]string{
		"the gateway denied":     env(t, "gw.test", true, gw),
		"private ranges refused": env(t, "gw.test", false),
	} {
		proxy := h.startProxy(hostArg, env...)
		if out, err := h.get(proxy, "http://gw.test/"); err == nil || !strings.Contains(out, "403") || strings.Contains(out, "host-secret") {
			t.Errorf("%s: the host through the proxy must be refused with 403: %v %q", name, err, out)
		}
	}
}

// The case: with private destinations allowed, an allowed name that
// resolves to the host's address on another bridge (docker0, standing in
// here as a network of the test's own) reached a web server on the host
// through the proxy, which refused only its own network's gateway. The list
// the manager computes (hostaddrs.Read, the engine's networks and, for this
// local engine, the host's interfaces) refuses it with 403. Controls: a
// container on the proxy's network reaches the server directly, and a proxy
// given only its network's gateway (the list before) fetches it.
func TestProxyImageRefusesTheHostOnAnotherBridge(t *testing.T) {
	h := newHarness(t)
	other := h.network + "-docker0"
	h.docker("network", "create", "--label", h.label, other)
	gw := h.docker("network", "inspect", "-f", "{{range .IPAM.Config}}{{.Gateway}}{{end}}", other)
	ownGW := h.docker("network", "inspect", "-f", "{{range .IPAM.Config}}{{.Gateway}}{{end}}", h.network)
	if gw == "" || ownGW == "" {
		t.Fatalf("no gateways: %q %q", gw, ownGW)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(gw, "80"))
	if err != nil {
		t.Fatalf("listen on the other bridge's gateway %s:80 (a host address of the test's own network): %v", gw, err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		_ = http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = fmt.Fprint(w, "host-secret")
		}))
	}()
	if out, err := exec.Command("docker", "exec", h.network+"-client", "timeout", "5", "wget", "-q", "-O-", "http://"+gw+"/").CombinedOutput(); err != nil || string(out) != "host-secret" {
		t.Fatalf("control: the host service does not answer a container of another network at %s:80: %v %q", gw, err, out)
	}
	hostArg := []string{"--network", h.network, "--add-host", "hostgw.test:" + gw}
	before := h.startProxy(hostArg, env(t, "hostgw.test", true, ownGW)...)
	if out, err := h.get(before, "http://hostgw.test/"); err != nil || out != "host-secret" {
		t.Fatalf("control: a proxy refusing only its own network's gateway does not reach the host: %v %q", err, out)
	}

	engine, _, err := dockertest.Require()
	if err != nil {
		t.Fatal(err)
	}
	deny, _, err := hostaddrs.Read(context.Background(), engine, hostaddrs.Inputs{LocalEngine: engine.IsLocal(), AllowPrivate: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the host's addresses: %s", strings.Join(deny, ","))
	if !slices.Contains(deny, gw) || !slices.Contains(deny, ownGW) {
		t.Fatalf("the list %v lacks the gateways %s and %s", deny, gw, ownGW)
	}
	proxy := h.startProxy(hostArg, env(t, "hostgw.test", true, deny...)...)
	if out, err := h.get(proxy, "http://hostgw.test/"); err == nil || !strings.Contains(out, "403") || strings.Contains(out, "host-secret") {
		t.Fatalf("the host behind an allowed name must be refused with 403: %v %q", err, out)
	}
}

func TestProxyImageStopsOnAConfigurationNotWhole(t *testing.T) {
	h := newHarness(t)
	_, c := policy(t, "allowed.test", true)
	for name, tc := range map[string]struct{ config, message string }{
		"cut":     {c.Text[:len(c.Text)/2], "AFE_EGRESS_CONFIG is cut"},
		"missing": {"", "AFE_EGRESS_CONFIG is empty"},
	} {
		t.Run(name, func(t *testing.T) {
			out, err := exec.Command("docker", "run", "--name", fmt.Sprintf("%s-bad-%d", h.network, time.Now().UnixNano()), "--label", h.label,
				"--network", "none", "-e", "AFE_EGRESS_CONFIG="+tc.config, proxyImage).CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 64 {
				t.Fatalf("want exit 64, got %v: %s", err, out)
			}
			if !strings.Contains(string(out), tc.message) {
				t.Fatalf("no clear message: %s", out)
			}
		})
	}
}

// The image holds what the proxy runs and nothing a workload that took
// squid over could use further: no setuid or setgid file, no package
// manager, no network or file tool beyond the entrypoint's, and its default
// user is not root. Read from the container's exported filesystem, so a
// tool that comes back with a new base image fails here.
func TestProxyImageHoldsOnlyWhatItRuns(t *testing.T) {
	h := newHarness(t)
	name := h.network + "-fs"
	h.docker("create", "--name", name, "--label", h.label, "--network", "none", proxyImage)
	if user := h.docker("image", "inspect", "-f", "{{.Config.User}}", proxyImage); user == "" || user == "root" || user == "0" {
		t.Fatalf("the image's user is %q", user)
	}
	export := exec.Command("docker", "export", name)
	stdout, err := export.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := export.Start(); err != nil {
		t.Fatal(err)
	}
	programs := map[string]bool{}
	// The engine's own files of every container, which it writes 0755.
	engine := map[string]bool{"/.dockerenv": true, "/dev/console": true, "/etc/hostname": true, "/etc/hosts": true, "/etc/resolv.conf": true}
	tr := tar.NewReader(stdout)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if hdr.Mode&0o6000 != 0 {
			t.Errorf("%s is setuid or setgid (%o)", hdr.Name, hdr.Mode)
		}
		base := path.Base(hdr.Name)
		file := "/" + strings.TrimPrefix(hdr.Name, "/")
		if hdr.Typeflag == tar.TypeReg && hdr.Mode&0o111 != 0 && !strings.Contains(base, ".so") && !engine[file] {
			programs[file] = true
		}
	}
	if err := export.Wait(); err != nil {
		t.Fatal(err)
	}
	want := []string{"/usr/sbin/squid", "/usr/lib/squid/unlinkd", "/bin/dash", "/bin/bash", "/bin/mv",
		"/usr/bin/id", "/bin/cat", "/usr/local/bin/afe-egress-squid", "/usr/local/bin/afe-proxy-probe"}
	for _, p := range want {
		if !programs[p] {
			t.Errorf("%s is missing", p)
		}
		delete(programs, p)
	}
	for p := range programs {
		// The dynamic loader is the only other executable file (links such
		// as /bin/sh point at these).
		if !strings.HasPrefix(path.Base(p), "ld-linux") {
			t.Errorf("the image holds a program it does not run: %s", p)
		}
	}
}
