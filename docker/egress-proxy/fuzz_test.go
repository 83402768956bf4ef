package egressproxy

import (
	"strings"
	"testing"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/sandboxspec"
)

// The proxy's entrypoint and the controller agree on every allowlist, and
// what the entrypoint renders never carries anything but the fixed rules
// and the validated names.
func FuzzEntrypointAgreesWithController(f *testing.F) {
	label63 := strings.Repeat("a", 63)
	for _, s := range []string{"example.com", "a.com,.b.org", "a.com\nhttp_access allow all", "10.0.0.1", "a.com,,b.com", "exаmple.com", "", "A.com", "a.com b.com",
		// The edges of a name, which the entrypoint checks in the shell.
		label63 + ".com", label63 + "a.com", "a." + label63, "a." + label63 + "a", "..a.com", ".a.com", ".a.co-m", "a.1com", "a.c1",
		"-a.com", "a-.com", "a.-com", "a.com-", "a--b.com", "1.2.3.4", "a.b.c.d.e.f", "a..com", "a.com.", ".com", "a.b-", "0a.b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, hosts string) {
		if strings.ContainsRune(hosts, 0) {
			return // not representable in an environment variable
		}
		out, _, code := render(map[string]string{"AFE_EGRESS_HOSTS": hosts})
		var list []afev1.EgressHost
		for _, h := range strings.Split(hosts, ",") {
			list = append(list, afev1.EgressHost(h))
		}
		// An empty list admits nothing (a pool's proxy before its claim).
		goOK := hosts == "" || sandboxspec.ValidateEgress(list) == nil
		if goOK != (code == 0) {
			t.Fatalf("%q: controller accepts=%v, entrypoint exit=%d", hosts, goOK, code)
		}
		if code != 0 {
			if out != "" {
				t.Fatalf("%q: refused but rendered %q", hosts, out)
			}
			return
		}
		var allowed []string
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			if strings.HasPrefix(line, "http_access allow") && line != "http_access allow afe_allowed" {
				t.Fatalf("%q: unexpected rule %q", hosts, line)
			}
			if rest, ok := strings.CutPrefix(line, "acl afe_allowed "); ok {
				host, ok := strings.CutPrefix(rest, "dstdomain -n ")
				if !ok || strings.Contains(host, " ") {
					t.Fatalf("%q: allowlist rendered as %q", hosts, line)
				}
				allowed = append(allowed, host)
			}
			if len(line) > squidLineMax {
				t.Fatalf("%q: a line of %d characters", hosts, len(line))
			}
		}
		if hosts != "" && strings.Join(allowed, ",") != hosts {
			t.Fatalf("%q: allowlist rendered as %q", hosts, allowed)
		}
	})
}
