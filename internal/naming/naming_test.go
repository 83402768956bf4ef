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
			for _, n := range derived(got) {
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
	want := []string{"afe-ns.t", "afe-ns.t_ws", "afe-ns.t_net", "afe-ns.t_proxy"}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatal(d)
	}
}

func TestSnapshotNumber(t *testing.T) {
	key := "ns.sbx"
	tests := map[string]struct {
		volume string
		want   int
	}{
		"first":            {"afe-ns.sbx_snap-1", 1},
		"twelfth":          {"afe-ns.sbx_snap-12", 12},
		"legacy":           {"afe-ns.sbx-snap-4", 4},
		"workspace":        {"afe-ns.sbx_ws", 0},
		"other sandbox":    {"afe-ns.sbx2_snap-3", 0},
		"legacy of other":  {"afe-ns.sbx2-snap-3", 0},
		"leading zero":     {"afe-ns.sbx_snap-01", 0},
		"zero":             {"afe-ns.sbx_snap-0", 0},
		"not a number":     {"afe-ns.sbx_snap-x", 0},
		"copy helper":      {"afe-ns.sbx_snap-1_copy", 0},
		"too many digits":  {"afe-ns.sbx_snap-1234567890", 0},
		"sandbox x-snap-1": {"afe-ns.sbx-snap-1-copy-from", 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := SnapshotNumber(key, tc.volume); got != tc.want {
				t.Fatalf("SnapshotNumber(%q) = %d, want %d", tc.volume, got, tc.want)
			}
		})
	}
	if n := NextSnapshot(key, []string{"afe-ns.sbx_snap-2", "afe-ns.sbx_ws", "afe-ns.sbx-snap-7"}); n != 8 {
		t.Fatalf("NextSnapshot = %d", n)
	}
}

// TestNoNameOfOneSandboxIsAnotherSandboxs: every derived name of one
// sandbox differs from every derived name of any other sandbox of the same
// namespace, whatever their Kubernetes names (issue: "x-proxy" next to "x").
func TestNoNameOfOneSandboxIsAnotherSandboxs(t *testing.T) {
	names := []string{"x", "x-proxy", "x-net", "x-ws", "x-snap-1", "x-snap-1-copy-from", "x-snap-1-copy-to",
		"x-restore-from", "x-ws-restore-from", "x.y", "x-proxy-net", strings.Repeat("a", 253), strings.Repeat("a", 252) + "b"}
	owner := map[string]string{}
	for _, n := range names {
		k := Key("ns", n)
		for _, d := range derived(k) {
			if prev, ok := owner[d]; ok && prev != n {
				t.Fatalf("%q is a name of both %q and %q", d, prev, n)
			}
			owner[d] = n
		}
	}
}

// derived is every Docker name of a sandbox's objects.
func derived(k string) []string {
	snap := Snapshot(k, 1)
	return []string{Container(k), Volume(k), Network(k), Proxy(k), snap, CopyHelper(snap) + "-from", CopyHelper(snap) + "-to",
		Restore(k) + "-from", Restore(k) + "-to", Snapshot(k, 2), ImageVolume(k, "/data"), Claim(k)}
}

// memberIDs are member IDs of every kind of digit, and IDs that read like
// the end of a cut key.
var memberIDs = []string{"0123456789", "abcdefabcd", "0000000000", "ffffffffff", "1a2b3c4d5e"}

// memberNames is every Docker name of the members of the pool of key k.
func memberNames(k string) []string {
	var out []string
	for _, id := range memberIDs {
		m := Member(k, id)
		out = append(out, m, MemberVolume(m), MemberNetwork(m), MemberProxy(m), MemberImageVolume(m, "/data"))
	}
	return out
}

func TestMemberNames(t *testing.T) {
	m := Member("ns.pool", "0123456789")
	got := []string{m, MemberVolume(m), MemberNetwork(m), MemberProxy(m), Claim("ns.sbx")}
	want := []string{"afe-ns.pool_member-0123456789", "afe-ns.pool_member-0123456789_ws",
		"afe-ns.pool_member-0123456789_net", "afe-ns.pool_member-0123456789_proxy", "afe-ns.sbx_claim"}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatal(d)
	}
}

// The sandbox key space and the member space are disjoint: no Sandbox,
// whatever its name, has a name of a member of any pool of its namespace,
// a pool named like the Sandbox and pools with cut keys included; and no
// member of one pool has the name of another pool's member.
func TestNoMemberIsNamedLikeASandbox(t *testing.T) {
	names := []string{"x", "x-member", "x-member-0123456789", "x.member-0123456789", "pool", "pool.x",
		"x-ws", "x-claim", strings.Repeat("a", 253), strings.Repeat("a", 252) + "b", strings.Repeat("a", 90)}
	owner := map[string]string{}
	for _, n := range names {
		for _, d := range derived(Key("ns", n)) {
			owner[d] = "sandbox " + n
		}
	}
	for _, n := range names {
		for _, d := range memberNames(Key("ns", n)) {
			if prev, ok := owner[d]; ok {
				t.Fatalf("%q is a name of both %s and a member of pool %q", d, prev, n)
			}
			owner[d] = "pool " + n
		}
	}
}

func TestMemberID(t *testing.T) {
	pool := Key("ns", "pool")
	tests := map[string]struct {
		name   string
		wantID string
		wantOK bool
	}{
		"member":                {Member(pool, "0123456789"), "0123456789", true},
		"claimed (a sandbox's)": {Container(Key("ns", "sbx")), "", false},
		"member's volume":       {MemberVolume(Member(pool, "0123456789")), "", false},
		"another pool's member": {Member(Key("ns", "pool2"), "0123456789"), "", false},
		"a pool named pool.x":   {Member(Key("ns", "pool.x"), "0123456789"), "", false},
		"upper case":            {Member(pool, "ABCDEF0123"), "", false},
		"short":                 {Member(pool, "01234"), "", false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			id, ok := MemberID(pool, tc.name)
			if ok != tc.wantOK || (ok && id != tc.wantID) {
				t.Fatalf("MemberID(%q) = %q, %v; want %q, %v", tc.name, id, ok, tc.wantID, tc.wantOK)
			}
		})
	}
	id, err := NewMemberID(strings.NewReader("\x01\x23\x45\x67\x89"))
	if err != nil || id != "0123456789" || !IsMemberID(id) {
		t.Fatalf("NewMemberID = %q, %v", id, err)
	}
	if _, err := NewMemberID(strings.NewReader("ab")); err == nil {
		t.Fatal("NewMemberID read from too little")
	}
}
