package egressproxy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/sandboxspec"
	"afe.dev/sandbox/test/dockertest"
)

// squidLineMax is the longest configuration line squid 5.7 reads whole:
// it reads with fgets into a buffer of BUFSIZ (8192) bytes, which keeps
// 8191 of them; the rest of a longer line is read as a line of its own.
// Measured with squid -k parse in the image: a line of 8191 characters is
// parsed, one of 8192 is refused ("unrecognized: 'a'").
const squidLineMax = 8191

// egressName is a host name of the given length (70 or more), different
// for each i below 100: "hNN", labels of 63 characters at most, ".io".
func egressName(i, length int) string {
	name := fmt.Sprintf("h%02d", i)
	for left := length - len(name) - len(".io"); left > 0; left = length - len(name) - len(".io") {
		label := min(63, left-1)
		if left-1-label == 1 {
			label-- // never a last label of nothing
		}
		name += "." + strings.Repeat("a", label)
	}
	return name + ".io"
}

// largestAllowlist is the largest allowlist admission accepts:
// MaxEgressHosts names of MaxEgressHostLength characters each.
func largestAllowlist() []string {
	hosts := make([]string, sandboxspec.MaxEgressHosts)
	for i := range hosts {
		hosts[i] = egressName(i, sandboxspec.MaxEgressHostLength)
	}
	return hosts
}

func egressList(hosts []string) []afev1.EgressHost {
	list := make([]afev1.EgressHost, len(hosts))
	for i, h := range hosts {
		list[i] = afev1.EgressHost(h)
	}
	return list
}

// Admission's bounds and the rendered configuration, held to each other:
// the largest allowlist admission accepts (64 names of 253 characters) is
// the entrypoint's too, and renders into lines squid reads whole, every
// name in them; one entry or one character more is refused by both. So is
// a long list of the host's addresses (the manager's, not bounded by
// admission).
func TestEntrypointRendersAdmissionsLargestAllowlist(t *testing.T) {
	hosts := largestAllowlist()
	if len(hosts[0]) != sandboxspec.MaxEgressHostLength || len(hosts) != sandboxspec.MaxEgressHosts {
		t.Fatalf("the list has %d names of %d characters", len(hosts), len(hosts[0]))
	}
	if err := sandboxspec.ValidateEgress(egressList(hosts)); err != nil {
		t.Fatalf("admission refuses its largest allowlist: %v", err)
	}
	var deny []string
	for i := range 512 {
		deny = append(deny, fmt.Sprintf("fd00:ffff:ffff:ffff:ffff:ffff:ffff:%04x/128", i))
	}
	out, errs, code := render(map[string]string{"AFE_EGRESS_HOSTS": strings.Join(hosts, ","), "AFE_EGRESS_DENY_IPS": strings.Join(deny, ",")})
	if code != 0 {
		t.Fatalf("the entrypoint refuses admission's largest allowlist: %d %s", code, errs)
	}
	var allowed, denied []string
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if len(line) > squidLineMax {
			t.Errorf("a line of %d characters, over squid's %d: %.60s…", len(line), squidLineMax, line)
		}
		if host, ok := strings.CutPrefix(line, "acl afe_allowed dstdomain -n "); ok {
			allowed = append(allowed, host)
		}
		if ip, ok := strings.CutPrefix(line, "acl afe_host dst "); ok {
			denied = append(denied, ip)
		}
	}
	if !slices.Equal(allowed, hosts) || !slices.Equal(denied, deny) {
		t.Fatalf("rendered %d of the %d names and %d of the %d addresses", len(allowed), len(hosts), len(denied), len(deny))
	}

	for name, over := range map[string][]string{
		"one entry more":     append(slices.Clone(hosts), "one.more.io"),
		"one character more": append(slices.Clone(hosts[1:]), egressName(99, sandboxspec.MaxEgressHostLength+1)),
	} {
		if err := sandboxspec.ValidateEgress(egressList(over)); err == nil {
			t.Errorf("%s: admitted", name)
		}
		if out, _, code := render(map[string]string{"AFE_EGRESS_HOSTS": strings.Join(over, ",")}); code != 64 || out != "" {
			t.Errorf("%s: the entrypoint exits %d", name, code)
		}
	}
}

// runsThisEntrypoint fails the test when the proxy container runs another
// entrypoint than this directory's (make images rebuilds the image when the
// file changes): a stale image proves nothing.
func runsThisEntrypoint(h *harness, proxy string) {
	h.t.Helper()
	want, err := os.ReadFile("entrypoint.sh")
	if err != nil {
		h.t.Fatal(err)
	}
	got, err := exec.Command("docker", "exec", proxy, "cat", "/usr/local/bin/afe-egress-proxy").Output()
	if err != nil || string(got) != string(want) {
		h.t.Fatalf("%s does not run this entrypoint.sh (%v): rebuild it (make images)", proxyImage, err)
	}
}

// The largest allowlist admission accepts makes a proxy that starts and
// answers, and admits the last name of the list (every line was read); a
// name off the list is still refused. The same list given in place, on
// the proxy's stdin as the controller gives it (a line of 16 KiB), is
// taken.
func TestProxyImageAnswersWithAdmissionsLargestAllowlist(t *testing.T) {
	h := newHarness(t)
	hosts := largestAllowlist()
	last := hosts[len(hosts)-1]
	webIP := dockertest.ContainerIP(h.network+"-web", h.network)
	proxy := h.startProxy([]string{"--network", h.network, "--add-host", last + ":" + webIP},
		"AFE_EGRESS_HOSTS="+strings.Join(hosts, ","), "AFE_EGRESS_ALLOW_PRIVATE=1")
	runsThisEntrypoint(h, proxy)
	if out, err := h.get(proxy, "http://"+last+"/"); err != nil || out != "web-ok" {
		t.Fatalf("the allowlist's last name: %v %q", err, out)
	}
	if out, err := h.get(proxy, "http://allowed.test/"); err == nil || !strings.Contains(out, "403") {
		t.Fatalf("a name off the allowlist must be refused with 403: %v %q", err, out)
	}

	engine, err := docker.New("")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	slices.Reverse(hosts)
	nonce := "0123abcd"
	answer, err := engine.Tell(ctx, proxy, "afe-allowlist "+nonce+" bb 1 "+strings.Join(hosts, ",")+" -",
		func(line string) bool { return strings.HasSuffix(line, " "+nonce) })
	if err != nil && !errors.Is(err, docker.ErrNoAnswer) {
		t.Fatal(err)
	}
	if answer != "afe-egress-proxy: allowlist bb taken "+nonce {
		t.Fatalf("the largest allowlist in place: %q", answer)
	}
	if out, err := h.get(proxy, "http://"+last+"/"); err != nil || out != "web-ok" {
		t.Fatalf("the allowlist's first name, after the reload: %v %q", err, out)
	}
}
