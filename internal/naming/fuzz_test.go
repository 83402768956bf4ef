package naming

import (
	"regexp"
	"testing"
)

var k8sName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$`)
var k8sNamespace = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// Keys are valid Docker names of bounded length, and two different
// namespace/name pairs never share one.
func FuzzKey(f *testing.F) {
	f.Add("default", "tk-1", "default", "tk-2")
	f.Add("a-b", "c", "a", "b-c")
	f.Add("ns", "x.y", "ns.x", "y")
	f.Fuzz(func(t *testing.T, ns1, n1, ns2, n2 string) {
		if !k8sNamespace.MatchString(ns1) || !k8sName.MatchString(n1) || !k8sNamespace.MatchString(ns2) || !k8sName.MatchString(n2) {
			return
		}
		k1, k2 := Key(ns1, n1), Key(ns2, n2)
		for _, k := range []string{k1, k2} {
			if len(k) > maxKey {
				t.Fatalf("key %q is longer than %d", k, maxKey)
			}
			for _, n := range derived(k) {
				if !dockerName.MatchString(n) {
					t.Fatalf("%q is not a valid Docker name", n)
				}
			}
		}
		if (ns1 != ns2 || n1 != n2) && k1 == k2 {
			t.Fatalf("%s/%s and %s/%s share the key %q", ns1, n1, ns2, n2, k1)
		}
		// The members of a pool named like either (the same namespace and
		// name included: a pool and a Sandbox may share them) are never
		// named like an object of the other.
		for _, pair := range [][2]string{{k1, k2}, {k2, k1}} {
			sandbox := map[string]bool{}
			for _, n := range derived(pair[0]) {
				sandbox[n] = true
			}
			for _, n := range memberNames(pair[1]) {
				if sandbox[n] {
					t.Fatalf("the member name %q is a name of the sandbox of key %q", n, pair[0])
				}
				if !dockerName.MatchString(n) {
					t.Fatalf("%q is not a valid Docker name", n)
				}
			}
		}
		if ns1 == ns2 && n1 != n2 {
			theirs := map[string]bool{}
			for _, n := range derived(k2) {
				theirs[n] = true
			}
			for _, n := range derived(k1) {
				if theirs[n] {
					t.Fatalf("%s/%s and %s/%s share the Docker name %q", ns1, n1, ns2, n2, n)
				}
			}
		}
	})
}
