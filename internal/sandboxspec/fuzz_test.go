package sandboxspec

import (
	"net"
	"strings"
	"testing"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// An accepted egress entry is always safe to hand to squid and never an
// address, whatever the input.
func FuzzValidateEgressHost(f *testing.F) {
	for _, s := range []string{"example.com", ".pypi.org", "10.0.0.1", "a.com\nhttp_access allow all", "*.x.com", "exаmple.com", "x.y:80", "", ".com"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		if ValidateEgressHost(h) != nil {
			return
		}
		if strings.Trim(h, "abcdefghijklmnopqrstuvwxyz0123456789.-") != "" {
			t.Fatalf("accepted %q with a character outside [a-z0-9.-]", h)
		}
		if len(h) > 253 || strings.Contains(h, "..") || strings.HasSuffix(h, ".") || !strings.Contains(strings.TrimPrefix(h, "."), ".") {
			t.Fatalf("accepted malformed %q", h)
		}
		if net.ParseIP(strings.TrimPrefix(h, ".")) != nil {
			t.Fatalf("accepted an IP literal %q", h)
		}
		for _, label := range strings.Split(strings.TrimPrefix(h, "."), ".") {
			if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
				t.Fatalf("accepted %q with a bad label %q", h, label)
			}
		}
		if err := ValidateEgress([]afev1.EgressHost{afev1.EgressHost(h)}); err != nil {
			t.Fatalf("ValidateEgressHost and ValidateEgress disagree on %q: %v", h, err)
		}
	})
}

// ParseUser never accepts root, in any spelling.
func FuzzParseUser(f *testing.F) {
	for _, s := range []string{"0", "00", "0:0", "root", "1000", "1000:1000", "1:0", "-1", "4294967296"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		uid, gid, err := ParseUser(s)
		if err == nil && (uid <= 0 || gid <= 0) {
			t.Fatalf("accepted %q as %d:%d", s, uid, gid)
		}
	})
}
