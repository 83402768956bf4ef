package egressproxy

import (
	"net/netip"
	"strings"
	"testing"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/egress"
	"afe.dev/sandbox/internal/sandboxspec"
)

// The renderer held to admission and to the proxy, for any allowlist: it
// renders exactly what admission accepts; what it renders is whole to the
// entrypoint (which starts squid with it); and it holds no directive but
// the fixed ones and the rules' templates, each carrying a checked name or
// address as a word of its own.
func FuzzRendererHeldToTheProxy(f *testing.F) {
	label63 := strings.Repeat("a", 63)
	for _, s := range []string{"example.com", "a.com,.b.org", "a.com\nhttp_access allow all", "10.0.0.1", "a.com,,b.com", "exаmple.com", "", "A.com", "a.com b.com",
		"a.com#x", `a.com"`, "a.com\tall", label63 + ".com", label63 + "a.com", "a." + label63, "..a.com", ".a.com", "-a.com", "a.com.", ".com", "a.com,a.com"} {
		f.Add(s, false, "172.17.0.1")
		f.Add(s, true, "")
	}
	fixed, err := egress.Policy{}.Render()
	if err != nil {
		f.Fatal(err)
	}
	fixedLines := map[string]bool{}
	for _, l := range strings.Split(fixed.Text, "\n") {
		fixedLines[l] = true
	}
	f.Fuzz(func(t *testing.T, hosts string, private bool, deny string) {
		var entries []string
		if hosts != "" {
			entries = strings.Split(hosts, ",")
		}
		list := make([]afev1.EgressHost, len(entries))
		for i, e := range entries {
			list[i] = afev1.EgressHost(e)
		}
		admitted := sandboxspec.ValidateEgress(list) == nil
		p, err := egress.ParseHosts(entries)
		var c egress.Config
		if err == nil {
			c, err = egress.Policy{Hosts: p, AllowPrivate: private, DenyIPs: denied(deny)}.Render()
		}
		if (err == nil) != admitted {
			t.Fatalf("%q: admission accepts %v, the renderer %v", hosts, admitted, err)
		}
		if err != nil {
			return
		}
		if strings.ContainsRune(c.Text, 0) {
			t.Fatalf("%q: a NUL rendered", hosts)
		}
		if errs, code := check(c.Text); code != 0 {
			t.Fatalf("%q: the entrypoint refuses the rendering: %s", hosts, errs)
		}
		var allowed []string
		for _, l := range strings.Split(strings.TrimSuffix(c.Text, "\n"), "\n") {
			if len(l) > egress.MaxLine {
				t.Fatalf("%q: a line of %d characters", hosts, len(l))
			}
			switch {
			case fixedLines[l], l == egress.Header+c.ID, l == egress.Trailer+c.ID:
			case strings.HasPrefix(l, "acl afe_allowed dstdomain -n "):
				name := strings.TrimPrefix(l, "acl afe_allowed dstdomain -n ")
				if _, err := egress.ParseHost(name); err != nil {
					t.Fatalf("%q: rendered %q", hosts, l)
				}
				allowed = append(allowed, name)
			case strings.HasPrefix(l, "acl afe_host dst "):
				if _, err := netip.ParsePrefix(strings.TrimPrefix(l, "acl afe_host dst ") + "/128"); err != nil {
					if _, err := netip.ParsePrefix(strings.TrimPrefix(l, "acl afe_host dst ")); err != nil {
						if _, err := netip.ParseAddr(strings.TrimPrefix(l, "acl afe_host dst ")); err != nil {
							t.Fatalf("%q: rendered %q", hosts, l)
						}
					}
				}
			case rules[l]:
			default:
				t.Fatalf("%q: a directive outside the renderer's set: %q", hosts, l)
			}
		}
		if strings.Join(allowed, ",") != hosts {
			t.Fatalf("%q: allowlist rendered as %q", hosts, allowed)
		}
	})
}

// rules are the access rules the renderer may write.
var rules = map[string]bool{
	"http_access deny all afe_why_nothing":                 true,
	"http_access deny afe_connect !afe_tls afe_why_port":   true,
	"http_access deny !afe_connect !afe_http afe_why_port": true,
	"http_access deny !afe_allowed afe_why_host":           true,
	"http_access deny afe_host afe_why_address":            true,
	"http_access deny afe_private afe_why_private":         true,
	"http_access allow afe_allowed":                        true,
	"http_access deny all":                                 true,
}

// denied are the comma-separated addresses that parse, the others left
// out (the manager's list is its own, not the tenant's).
func denied(list string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range strings.Split(list, ",") {
		if p, err := egress.ParseDenied([]string{s}); err == nil {
			out = append(out, p...)
		}
	}
	return out
}
