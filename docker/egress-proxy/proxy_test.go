// Package egressproxy tests the egress proxy image: its entrypoint's
// validation and squid configuration (run with sh, no Docker needed) and the
// built image's rules against test servers of its own.
package egressproxy

import (
	"archive/tar"
	"bytes"
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

	"afe.dev/sandbox/docker"
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

// render runs the entrypoint with --render and the given environment.
func render(env map[string]string) (stdout, stderr string, code int) {
	cmd := exec.Command("sh", "entrypoint.sh", "--render")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	}
	return out.String(), errb.String(), code
}

func TestEntrypointRefusesHostileAllowlists(t *testing.T) {
	hostile := map[string]string{
		"ip":                  "10.0.0.1",
		"ipv6":                "::1",
		"port":                "example.com:443",
		"scheme":              "http://example.com",
		"path":                "example.com/x",
		"wildcard":            "*.example.com",
		"space":               "example.com other.com",
		"newline injection":   "allowed.test\nhttp_access allow all",
		"carriage return":     "allowed.test\rhttp_access allow all",
		"tab":                 "allowed.test\tall",
		"quote":               `allowed.test"`,
		"upper case":          "Example.com",
		"empty entry":         "a.com,,b.com",
		"leading comma":       ",a.com",
		"trailing comma":      "a.com,",
		"empty label":         "example..com",
		"tld only":            ".com",
		"trailing dot":        "example.com.",
		"label too long":      strings.Repeat("a", 64) + ".com",
		"name too long":       strings.Repeat("abcdefghi.", 26) + "com",
		"numeric tld":         "example.123",
		"leading dash":        "-a.example.com",
		"too many":            strings.TrimSuffix(strings.Repeat("a.example.com,", 65), ","),
		"shell expansion":     "$(reboot).com",
		"glob":                "a?.com",
		"semicolon":           "a.com;b.com",
		"unicode look-alike":  "exаmple.com", // Cyrillic а
		"squid option":        "-n",
		"squid include":       "include",
		"url-encoded newline": "a.com%0ahttp_access",
		"last of several bad": "a.example.com,b.example.com,c..example.com",
	}
	for name, hosts := range hostile {
		t.Run(name, func(t *testing.T) {
			out, errs, code := render(map[string]string{"AFE_EGRESS_HOSTS": hosts})
			if code != 64 || out != "" || !strings.Contains(errs, "afe-egress-proxy:") {
				t.Fatalf("code %d, stdout %q, stderr %q", code, out, errs)
			}
		})
	}
	for name, env := range map[string]map[string]string{
		"bad private flag": {"AFE_EGRESS_HOSTS": "a.com", "AFE_EGRESS_ALLOW_PRIVATE": "yes"},
		"bad deny ip":      {"AFE_EGRESS_HOSTS": "a.com", "AFE_EGRESS_DENY_IPS": "1.2.3.4 all"},
		"deny ip injected": {"AFE_EGRESS_HOSTS": "a.com", "AFE_EGRESS_DENY_IPS": "1.2.3.4\nhttp_access allow all"},
		"deny ip a name":   {"AFE_EGRESS_HOSTS": "a.com", "AFE_EGRESS_DENY_IPS": "deadbeef"},
		"deny ip a colon":  {"AFE_EGRESS_HOSTS": "a.com", "AFE_EGRESS_DENY_IPS": ":"},
		"deny ip partial":  {"AFE_EGRESS_HOSTS": "a.com", "AFE_EGRESS_DENY_IPS": "1.2.3"},
		"deny ip empty":    {"AFE_EGRESS_HOSTS": "a.com", "AFE_EGRESS_DENY_IPS": "1.2.3.4,,5.6.7.8"},
		"deny ip last bad": {"AFE_EGRESS_HOSTS": "a.com", "AFE_EGRESS_DENY_IPS": "1.2.3.4,5.6.7.8,1.2.3"},
	} {
		t.Run(name, func(t *testing.T) {
			if out, errs, code := render(env); code != 64 || out != "" {
				t.Fatalf("code %d, stdout %q, stderr %q", code, out, errs)
			}
		})
	}
}

// An empty allowlist (a warm pool's proxy before its claim) admits nothing:
// its one access rule denies all.
func TestEntrypointEmptyAllowlistAdmitsNothing(t *testing.T) {
	out, errs, code := render(map[string]string{"AFE_EGRESS_HOSTS": "", "AFE_EGRESS_ALLOW_PRIVATE": "1"})
	if code != 0 {
		t.Fatalf("code %d: %s", code, errs)
	}
	var access []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "http_access") {
			access = append(access, l)
		}
	}
	if !slices.Equal(access, []string{"http_access deny all afe_why_nothing"}) {
		t.Fatalf("access rules %q, want only a deny of all", access)
	}
	for name, id := range map[string]string{"upper case": "AB", "injected": "aa\nhttp_access allow all", "too long": strings.Repeat("a", 65)} {
		t.Run(name, func(t *testing.T) {
			if out, _, code := render(map[string]string{"AFE_EGRESS_HOSTS": "a.com", "AFE_EGRESS_ALLOWLIST_ID": id}); code != 64 || out != "" {
				t.Fatalf("allowlist ID %q: code %d, stdout %q", id, code, out)
			}
		})
	}
}

func TestEntrypointRendersTheRules(t *testing.T) {
	out, errs, code := render(map[string]string{
		"AFE_EGRESS_HOSTS":    "example.com,.pypi.org",
		"AFE_EGRESS_DENY_IPS": "172.17.0.1,10.1.0.0/16,fd00::2,fe80::42:27ff:fea2:8649,2001:db8::/32",
	})
	if code != 0 {
		t.Fatalf("code %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var access []string
	for _, l := range lines {
		if strings.HasPrefix(l, "http_access") {
			access = append(access, l)
		}
	}
	want := []string{
		"http_access deny afe_connect !afe_tls afe_why_port",
		"http_access deny !afe_connect !afe_http afe_why_port",
		"http_access deny !afe_allowed afe_why_host",
		"http_access deny afe_host afe_why_address",
		"http_access deny afe_private afe_why_private",
		"http_access allow afe_allowed",
		"http_access deny all",
	}
	if strings.Join(access, "\n") != strings.Join(want, "\n") {
		t.Fatalf("http_access rules:\n%s", strings.Join(access, "\n"))
	}
	for _, l := range []string{
		// Every private, loopback, link-local, shared, reserved and
		// multicast range, IPv4 and IPv6.
		"acl afe_private dst 0.0.0.0/8 10.0.0.0/8 100.64.0.0/10 127.0.0.0/8 169.254.0.0/16 172.16.0.0/12 192.0.0.0/24 192.168.0.0/16 198.18.0.0/15 224.0.0.0/3 ::/127 fc00::/7 fe80::/10 ff00::/8",
		// One entry a line (squid reads lines of 8191 characters at
		// most), the lines of one ACL adding up.
		"acl afe_allowed dstdomain -n example.com\nacl afe_allowed dstdomain -n .pypi.org",
		"acl afe_host dst 172.17.0.1\nacl afe_host dst 10.1.0.0/16\nacl afe_host dst fd00::2\nacl afe_host dst fe80::42:27ff:fea2:8649\nacl afe_host dst 2001:db8::/32",
		"cache deny all",
		"access_log stdio:/dev/stdout afe",
		// Lean: about 17 MiB resident rather than 25 (5 MiB of it
		// anonymous rather than 10), with no limit a workload would meet.
		"memory_pools off",
		"client_db off",
		"max_filedescriptors 1024",
		"tls_outgoing_options default-ca=off",
		"mime_table /dev/null",
	} {
		if !strings.Contains(out, l+"\n") {
			t.Fatalf("missing %q in\n%s", l, out)
		}
	}
	out, _, _ = render(map[string]string{"AFE_EGRESS_HOSTS": "example.com", "AFE_EGRESS_ALLOW_PRIVATE": "1"})
	if strings.Contains(out, "deny afe_private") || strings.Contains(out, "afe_host") {
		t.Fatalf("private destinations should be allowed:\n%s", out)
	}
}

// The manager leaves out of AFE_EGRESS_DENY_IPS the host's addresses the
// private rule refuses already (hostaddrs.PrivateRanges): that list must be
// the entrypoint's, range by range.
func TestEntrypointPrivateRangesAreTheManagers(t *testing.T) {
	out, errs, code := render(map[string]string{"AFE_EGRESS_HOSTS": "a.com"})
	if code != 0 {
		t.Fatalf("code %d: %s", code, errs)
	}
	var acl []string
	for _, l := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(l, "acl afe_private dst "); ok {
			acl = strings.Fields(rest)
		}
	}
	var manager []string
	for _, p := range hostaddrs.PrivateRanges {
		manager = append(manager, p.String())
	}
	if strings.Join(acl, " ") != strings.Join(manager, " ") {
		t.Fatalf("the entrypoint refuses %v, the manager leaves out %v", acl, manager)
	}
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

	open := h.proxy("AFE_EGRESS_HOSTS=allowed.test", "AFE_EGRESS_ALLOW_PRIVATE=1")
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

	domain := h.proxy("AFE_EGRESS_HOSTS=.allowed.test", "AFE_EGRESS_ALLOW_PRIVATE=1")
	if out, err := h.get(domain, "http://www.allowed.test/"); err != nil || out != "web-ok" {
		t.Fatalf(".domain should admit a subdomain: %v %q", err, out)
	}

	// Without AFE_EGRESS_ALLOW_PRIVATE an allowed name on a private address
	// is refused.
	private := h.proxy("AFE_EGRESS_HOSTS=allowed.test")
	if out, err := h.get(private, "http://allowed.test/"); err == nil || !strings.Contains(out, "403") {
		t.Fatalf("a private destination must be refused: %v %q", err, out)
	}
	// Denied addresses are refused even when private ones are allowed.
	webIP := dockertest.ContainerIP(h.network+"-web", h.network)
	hostDenied := h.proxy("AFE_EGRESS_HOSTS=allowed.test", "AFE_EGRESS_ALLOW_PRIVATE=1", "AFE_EGRESS_DENY_IPS="+webIP)
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
		"AFE_EGRESS_HOSTS=metadata.test,loop.test")
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
// refused for the gateway's address (AFE_EGRESS_DENY_IPS, which the
// controller sets to it) even when private addresses are allowed. Positive
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
	open := h.startProxy(hostArg, "AFE_EGRESS_HOSTS=gw.test", "AFE_EGRESS_ALLOW_PRIVATE=1")
	if out, err := h.get(open, "http://gw.test/"); err != nil || out != "host-secret" {
		t.Fatalf("control: a proxy without the host rule does not reach it: %v %q", err, out)
	}
	for name, env := range map[string][]string{
		"the gateway denied":     {"AFE_EGRESS_HOSTS=gw.test", "AFE_EGRESS_ALLOW_PRIVATE=1", "AFE_EGRESS_DENY_IPS=" + gw},
		"private ranges refused": {"AFE_EGRESS_HOSTS=gw.test"},
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
	before := h.startProxy(hostArg, "AFE_EGRESS_HOSTS=hostgw.test", "AFE_EGRESS_ALLOW_PRIVATE=1", "AFE_EGRESS_DENY_IPS="+ownGW)
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
	proxy := h.startProxy(hostArg, "AFE_EGRESS_HOSTS=hostgw.test", "AFE_EGRESS_ALLOW_PRIVATE=1", "AFE_EGRESS_DENY_IPS="+strings.Join(deny, ","))
	if out, err := h.get(proxy, "http://hostgw.test/"); err == nil || !strings.Contains(out, "403") || strings.Contains(out, "host-secret") {
		t.Fatalf("the host behind an allowed name must be refused with 403: %v %q", err, out)
	}
}

func TestProxyImageStopsOnAHostileAllowlist(t *testing.T) {
	h := newHarness(t)
	name := h.network + "-bad"
	out, err := exec.Command("docker", "run", "--name", name, "--label", h.label, "--network", "none",
		"-e", "AFE_EGRESS_HOSTS=allowed.test\nhttp_access allow all", proxyImage).CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 64 {
		t.Fatalf("want exit 64, got %v: %s", err, out)
	}
	if !strings.Contains(string(out), "AFE_EGRESS_HOSTS may only hold") {
		t.Fatalf("no clear message: %s", out)
	}
}

// An allowlist is replaced in place (a request on the proxy's stdin, as the
// controller writes it through the engine): the new rules hold within a
// second, a connection in flight goes on to its end, --admits says the
// allowlist's ID, an empty allowlist admits nothing, and a hostile one is
// refused, leaving the rules as they were; a line that is not a request
// is not answered.
func TestProxyImageReloadsItsAllowlistInPlace(t *testing.T) {
	h := newHarness(t)
	// A server that streams for 6 s, on names of its own.
	h.docker("run", "-d", "--label", h.label, "--name", h.network+"-stream", "--network", h.network,
		"--network-alias", "stream.test", "--network-alias", "other.test", dockertest.TestImage, "sh", "-c",
		`mkdir -p /www/cgi-bin && echo other-ok > /www/index.html && printf '#!/bin/sh\nprintf "Content-Type: application/octet-stream\\r\\n\\r\\n"\nfor i in $(seq 60); do head -c 65536 /dev/zero; sleep 0.1; done\n' > /www/cgi-bin/slow && chmod 755 /www/cgi-bin/slow && exec httpd -f -p 80 -h /www`)
	proxy := h.proxy("AFE_EGRESS_HOSTS=stream.test", "AFE_EGRESS_ALLOW_PRIVATE=1", "AFE_EGRESS_ALLOWLIST_ID=aa")
	admits := func() string { return h.docker("exec", proxy, "afe-egress-proxy", "--admits") }
	engine, err := docker.New("")
	if err != nil {
		t.Fatal(err)
	}
	// tell writes a request line with a fresh nonce and returns the
	// proxy's answer to it, "" after two seconds without one.
	nonces := 0
	tell := func(format string) string {
		t.Helper()
		nonces++
		nonce := fmt.Sprintf("%032x", nonces)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		answer, err := engine.Tell(ctx, proxy, fmt.Sprintf(format, nonce),
			func(line string) bool { return strings.HasSuffix(line, " "+nonce) })
		if err != nil && !errors.Is(err, docker.ErrNoAnswer) {
			t.Fatal(err)
		}
		return strings.TrimSuffix(answer, " "+nonce)
	}
	reload := func(hosts, id string) (string, error) {
		if hosts == "" {
			hosts = "-"
		}
		answer := tell("afe-allowlist %s " + id + " 1 " + hosts + " -")
		taken := strings.TrimPrefix(answer, "afe-egress-proxy: allowlist ")
		if taken, ok := strings.CutSuffix(taken, " taken"); ok {
			return taken, nil
		}
		return "", fmt.Errorf("not taken: %q", answer)
	}
	// within polls until get(url) does what ok says, for at most a second.
	within := func(url string, allowed bool) {
		t.Helper()
		deadline := time.Now().Add(time.Second)
		for {
			out, err := h.get(proxy, url)
			if (err == nil) == allowed {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: allowed %t not in force a second after the reload: %v %q", url, allowed, err, out)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if got := admits(); got != "aa" {
		t.Fatalf("--admits says %q, want aa", got)
	}
	within("http://stream.test/", true)
	within("http://other.test/", false)

	client := h.network + "-client"
	h.docker("exec", "-d", "-e", "http_proxy=http://"+proxy+":3128", client, "sh", "-c",
		"wget -q -O /tmp/stream http://stream.test/cgi-bin/slow; echo $? > /tmp/stream.rc")
	time.Sleep(time.Second)

	if out, err := reload("stream.test,other.test", "bb"); err != nil || out != "bb" {
		t.Fatalf("reload: %v %q", err, out)
	}
	within("http://other.test/", true)
	if got := admits(); got != "bb" {
		t.Fatalf("--admits says %q, want bb", got)
	}
	if out, err := reload("other.test", "cc"); err != nil || out != "cc" {
		t.Fatalf("reload: %v %q", err, out)
	}
	within("http://stream.test/", false)
	for _, hostile := range []string{"other.test,http_access", "other.test,all", "OTHER.test", "other.test/x", "*", "other.test,,a.test"} {
		if out, err := reload(hostile, "dd"); err == nil {
			t.Fatalf("a hostile allowlist %q was taken: %q", hostile, out)
		}
	}
	if out, err := reload("other.test", "DD"); err == nil {
		t.Fatalf("an ID that is not lower-case hex was taken: %q", out)
	}
	// The addresses refused are validated too, whenever they change.
	for _, hostile := range []string{"1.2.3", "1.2.3.4,,5.6.7.8", "1.2.3.4;x", "fe80::1%eth0"} {
		if answer := tell("afe-allowlist %s dd 1 other.test " + hostile); answer != "afe-egress-proxy: allowlist refused" {
			t.Fatalf("hostile addresses %q: %q", hostile, answer)
		}
	}
	if answer := tell("afe-allowlist %s cc 1 other.test 192.0.2.1,2001:db8::/32"); answer != "afe-egress-proxy: allowlist cc taken" {
		t.Fatalf("addresses to refuse: %q", answer)
	}
	for _, ignored := range []string{"afe-allowlist %s dd 1 other.test - extra", "afe-allowlist %s dd 1", "allowlist %s dd 1 other.test -", "afe-allowlist X%s dd 1 other.test -"} {
		if answer := tell(ignored); answer != "" {
			t.Fatalf("%q was answered: %q", ignored, answer)
		}
	}
	if got := admits(); got != "cc" {
		t.Fatalf("after a refused reload --admits says %q, want cc", got)
	}
	within("http://stream.test/", false)
	if out, err := reload("", "ee"); err != nil || out != "ee" {
		t.Fatalf("reload of an empty allowlist: %v %q", err, out)
	}
	within("http://other.test/", false)

	// The stream began before the reloads and went on to its end.
	deadline := time.Now().Add(20 * time.Second)
	for {
		rc, err := exec.Command("docker", "exec", client, "cat", "/tmp/stream.rc").Output()
		if err == nil {
			size := h.docker("exec", client, "sh", "-c", "wc -c < /tmp/stream")
			if strings.TrimSpace(string(rc)) != "0" || size != fmt.Sprint(60*65536) {
				t.Fatalf("the stream in flight was cut by a reload: exit %s, %s bytes", rc, size)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the stream did not end")
		}
		time.Sleep(200 * time.Millisecond)
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
	want := []string{"/usr/sbin/squid", "/usr/lib/squid/unlinkd", "/bin/dash", "/bin/bash", "/bin/grep",
		"/usr/bin/id", "/bin/cat", "/usr/local/bin/afe-egress-proxy", "/usr/local/bin/afe-proxy-probe"}
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
