package naming

import (
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var dockerName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]+$`)

func TestKey(t *testing.T) {
	long := strings.Repeat("a", 253)
	tests := map[string]struct {
		namespace, name string
		want            string
	}{
		"short":             {"default", "tk-1", "default.tk-1"},
		"dotted name":       {"team-a", "web.v2", "team-a.web.v2"},
		"longest namespace": {strings.Repeat("n", 63), "x", strings.Repeat("n", 63) + ".x"},
		"long name is cut":  {"default", long, "default." + strings.Repeat("a", 75) + "_"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := Key(tc.namespace, tc.name)
			if !strings.HasPrefix(got, tc.want) {
				t.Fatal(cmp.Diff(tc.want, got))
			}
			if len(got) > maxKey {
				t.Fatalf("key %q longer than %d", got, maxKey)
			}
			for _, n := range []string{Container(got), Volume(got), Network(got), Proxy(got)} {
				if !dockerName.MatchString(n) {
					t.Fatalf("%q is not a valid Docker name", n)
				}
			}
		})
	}
}

func TestKeyIsUnique(t *testing.T) {
	pairs := [][2]string{
		{"a-b", "c"}, {"a", "b-c"}, {"a", "b.c"}, {"ab", "c"},
		{"default", strings.Repeat("a", 200)}, {"default", strings.Repeat("a", 201)},
		{"default", strings.Repeat("a", 199) + "b"},
	}
	seen := map[string][2]string{}
	for _, p := range pairs {
		k := Key(p[0], p[1])
		if prev, ok := seen[k]; ok {
			t.Fatalf("%v and %v share key %q", prev, p, k)
		}
		seen[k] = p
	}
}

func TestNames(t *testing.T) {
	got := []string{Container("ns.t"), Volume("ns.t"), Network("ns.t"), Proxy("ns.t")}
	want := []string{"afe-ns.t", "afe-ns.t-ws", "afe-ns.t-net", "afe-ns.t-proxy"}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatal(d)
	}
}
