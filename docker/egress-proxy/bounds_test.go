package egressproxy

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/egress"
	"afe.dev/sandbox/internal/sandboxspec"
	"afe.dev/sandbox/test/dockertest"
)

// largestAllowlist is the largest allowlist admission accepts:
// MaxEgressHosts names of MaxEgressHostLength characters each.
func largestAllowlist() []string {
	hosts := make([]string, sandboxspec.MaxEgressHosts)
	for i := range hosts {
		hosts[i] = egress.LongName(i, sandboxspec.MaxEgressHostLength)
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

// Admission's bounds and the renderer's, held to each other: the largest
// allowlist admission accepts (64 names of 253 characters) renders, and
// its text is whole to the entrypoint; one entry or one character more is
// refused by both.
func TestEntrypointTakesAdmissionsLargestAllowlist(t *testing.T) {
	hosts := largestAllowlist()
	if err := sandboxspec.ValidateEgress(egressList(hosts)); err != nil {
		t.Fatalf("admission refuses its largest allowlist: %v", err)
	}
	_, c := policy(t, strings.Join(hosts, ","), true)
	if errs, code := check(c.Text); code != 0 {
		t.Fatalf("the entrypoint refuses admission's largest allowlist: %d %s", code, errs)
	}
	for name, over := range map[string][]string{
		"one entry more":     append(slices.Clone(hosts), "one.more.io"),
		"one character more": append(slices.Clone(hosts[1:]), egress.LongName(99, sandboxspec.MaxEgressHostLength+1)),
	} {
		if err := sandboxspec.ValidateEgress(egressList(over)); err == nil {
			t.Errorf("%s: admitted", name)
		}
		list, err := egress.ParseHosts(over)
		if err == nil {
			_, err = egress.Policy{Hosts: list}.Render()
		}
		if err == nil {
			t.Errorf("%s: rendered", name)
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
	got, err := exec.Command("docker", "exec", proxy, "cat", "/usr/local/bin/afe-egress-squid").Output()
	if err != nil || string(got) != string(want) {
		h.t.Fatalf("%s does not run this entrypoint.sh (%v): rebuild it (make images)", proxyImage, err)
	}
}

// The largest allowlist admission accepts makes a proxy that starts and
// answers, and admits the last name of the list (every line was read); a
// name off the list is still refused. The same list given in place, on
// the proxy's stdin as the controller gives it (a line of 24 KiB), is
// taken.
func TestProxyImageAnswersWithAdmissionsLargestAllowlist(t *testing.T) {
	h := newHarness(t)
	hosts := largestAllowlist()
	last := hosts[len(hosts)-1]
	webIP := dockertest.ContainerIP(h.network+"-web", h.network)
	proxy := h.startProxy([]string{"--network", h.network, "--add-host", last + ":" + webIP}, env(t, strings.Join(hosts, ","), true)...)
	runsThisEntrypoint(h, proxy)
	if out, err := h.get(proxy, "http://"+last+"/"); err != nil || out != "web-ok" {
		t.Fatalf("the allowlist's last name: %v %q", err, out)
	}
	if out, err := h.get(proxy, "http://allowed.test/"); err == nil || !strings.Contains(out, "403") {
		t.Fatalf("a name off the allowlist must be refused with 403: %v %q", err, out)
	}
	slices.Reverse(hosts)
	_, reversed := policy(t, strings.Join(hosts, ","), true)
	newTeller(t, proxy).config(reversed)
	if out, err := h.get(proxy, "http://"+last+"/"); err != nil || out != "web-ok" {
		t.Fatalf("the allowlist's first name, after the reload: %v %q", err, out)
	}
}
