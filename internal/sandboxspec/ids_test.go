package sandboxspec

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/enginespec"
)

func TestParseIDRange(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    IDRange
		wantErr bool
	}{
		"the default":   {in: DefaultSandboxIDs.String(), want: DefaultSandboxIDs},
		"a range":       {in: "100000-165535", want: IDRange{100000, 165535}},
		"one id":        {in: "100000", wantErr: true},
		"two ranges":    {in: "1-5,10-20", wantErr: true},
		"empty":         {in: "", wantErr: true},
		"zero":          {in: "0-100", wantErr: true},
		"reversed":      {in: "20-10", wantErr: true},
		"not a number":  {in: "a-b", wantErr: true},
		"past the last": {in: "1-2147483647", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseIDRange(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestCheckSandboxIDs(t *testing.T) {
	tests := map[string]struct {
		opts    Options
		wantErr bool
	}{
		"the default, no policy":         {},
		"inside the allowed ranges":      {opts: Options{SandboxIDs: IDRange{100000, 165535}, AllowedUIDs: IDRanges{{1000, 200000}}, AllowedGIDs: IDRanges{{100000, 165535}}}},
		"covered by two ranges":          {opts: Options{SandboxIDs: IDRange{100, 300}, AllowedUIDs: IDRanges{{201, 400}, {1, 200}}}},
		"a hole in the ranges":           {opts: Options{SandboxIDs: IDRange{100, 300}, AllowedUIDs: IDRanges{{1, 199}, {201, 400}}}, wantErr: true},
		"the default outside allowed":    {opts: Options{AllowedUIDs: IDRanges{{1000, 65535}}}, wantErr: true},
		"partly outside --allowed-gids":  {opts: Options{SandboxIDs: IDRange{60000, 70000}, AllowedGIDs: IDRanges{{1000, 65535}}}, wantErr: true},
		"reaching the Run groups":        {opts: Options{SandboxIDs: IDRange{1999999000, 2000000000}}, wantErr: true},
		"just below the Run groups":      {opts: Options{SandboxIDs: IDRange{1999999000, 1999999999}}},
		"uid allowed, gid not, one hole": {opts: Options{SandboxIDs: IDRange{10, 20}, AllowedGIDs: IDRanges{{10, 14}, {16, 20}}}, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if err := CheckSandboxIDs(tc.opts); (err != nil) != tc.wantErr {
				t.Fatalf("err = %v", err)
			}
		})
	}
}

func TestAllocateID(t *testing.T) {
	small := Options{SandboxIDs: IDRange{10, 14}}
	// The place where the UID "a" starts in a range of five.
	start, err := AllocateID("a", nil, small)
	if err != nil {
		t.Fatal(err)
	}
	next := func(id int) int { return 10 + (id-10+1)%5 }
	tests := map[string]struct {
		holder string
		taken  map[int]bool
		opts   Options
		want   int
		reason string
	}{
		"where the holder starts":        {holder: "a", opts: small, want: start},
		"the same again":                 {holder: "a", taken: map[int]bool{99: true}, opts: small, want: start},
		"the next free one":              {holder: "a", taken: map[int]bool{start: true}, opts: small, want: next(start)},
		"wrapping around":                {holder: "a", taken: map[int]bool{start: true, next(start): true, next(next(start)): true}, opts: small, want: next(next(next(start)))},
		"a denied gid is skipped":        {holder: "a", opts: Options{SandboxIDs: small.SandboxIDs, DenyGIDs: []int{start}}, want: next(start)},
		"outside --allowed-uids skipped": {holder: "a", opts: Options{SandboxIDs: small.SandboxIDs, AllowedUIDs: IDRanges{{next(start), next(start)}}}, want: next(start)},
		"all taken":                      {holder: "a", taken: map[int]bool{10: true, 11: true, 12: true, 13: true, 14: true}, opts: small, reason: afev1.SandboxIDsExhaustedReason},
		"all taken or denied":            {holder: "a", taken: map[int]bool{10: true, 11: true, 12: true, 13: true}, opts: Options{SandboxIDs: small.SandboxIDs, DenyGIDs: []int{14}}, reason: afev1.SandboxIDsExhaustedReason},
		"the default range":              {holder: "a", want: -1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := AllocateID(tc.holder, tc.taken, tc.opts)
			reason := ""
			if ie, ok := AsInvalid(err); ok {
				reason = ie.Reason
			} else if err != nil {
				t.Fatalf("not an InvalidError: %v", err)
			}
			if reason != tc.reason {
				t.Fatalf("reason %q, want %q (err %v)", reason, tc.reason, err)
			}
			if tc.want == -1 {
				if !DefaultSandboxIDs.Contains(got) {
					t.Fatalf("%d is outside the default range %s", got, DefaultSandboxIDs)
				}
				return
			}
			if got != tc.want {
				t.Fatalf("got %d, want %d", got, tc.want)
			}
		})
	}
}

// Holders spread over the range: a thousand of them, each taking the id
// it gets, all get different ids, and each finds its own again when the
// others' are taken.
func TestAllocateIDGivesEachHolderItsOwn(t *testing.T) {
	opts := Options{SandboxIDs: IDRange{100000, 100999}}
	taken := map[int]bool{}
	got := map[string]int{}
	for i := range 1000 {
		h := "default/ns/ticket-" + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676))
		id, err := AllocateID(h, taken, opts)
		if err != nil {
			t.Fatalf("holder %d: %v", i, err)
		}
		if taken[id] {
			t.Fatalf("holder %d got %d, already taken", i, id)
		}
		taken[id], got[h] = true, id
	}
	if _, err := AllocateID("one more", taken, opts); err == nil {
		t.Fatal("a full range gave an id")
	}
	// The first holder's place is its own: with its id released it gets
	// it back, whatever the others hold.
	for h, id := range got {
		delete(taken, id)
		again, err := AllocateID(h, taken, opts)
		if err != nil || again != id {
			t.Fatalf("holder %s: got %d (%v), want its own %d", h, again, err, id)
		}
		taken[id] = true
	}
}

func TestValidateAllocated(t *testing.T) {
	tests := map[string]struct {
		user string
		opts Options
		want int
	}{
		"an id of the default range":  {user: "1900000007:1900000007", want: 1900000007},
		"a bare uid":                  {user: "1900000007"},
		"uid and gid differ":          {user: "1900000007:1900000008"},
		"padded":                      {user: "1900000007:01900000007"},
		"outside the range":           {user: "1000:1000"},
		"root":                        {user: "0:0"},
		"a denied gid":                {user: "12:12", opts: Options{SandboxIDs: IDRange{10, 20}, DenyGIDs: []int{12}}},
		"outside --allowed-gids":      {user: "12:12", opts: Options{SandboxIDs: IDRange{10, 20}, AllowedGIDs: IDRanges{{13, 20}}}},
		"inside a range set":          {user: "12:12", opts: Options{SandboxIDs: IDRange{10, 20}}, want: 12},
		"an empty label":              {user: ""},
		"the default range's last id": {user: "1900065535:1900065535", want: 1900065535},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ValidateAllocated(tc.user, tc.opts)
			if (err == nil) != (tc.want != 0) || got != tc.want {
				t.Fatalf("got %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}

func TestContainerUser(t *testing.T) {
	allocated := map[string]string{afev1.LabelUser: "1900000007:1900000007"}
	type result struct{ UID, GID int }
	tests := map[string]struct {
		spec    string
		c       enginespec.Container
		want    result
		wantErr bool
	}{
		"spec.user wins":          {spec: "1000:1001", c: enginespec.Container{User: "5:5", Labels: allocated}, want: result{1000, 1001}},
		"the allocated id":        {c: enginespec.Container{User: "1900000007:1900000007", Labels: allocated}, want: result{1900000007, 1900000007}},
		"no label":                {c: enginespec.Container{User: "1000:1000", Labels: map[string]string{}}, wantErr: true},
		"label and user differ":   {c: enginespec.Container{User: "1000:1000", Labels: allocated}, wantErr: true},
		"a label of two ids":      {c: enginespec.Container{User: "7:8", Labels: map[string]string{afev1.LabelUser: "7:8"}}, wantErr: true},
		"a label naming root":     {c: enginespec.Container{User: "0:0", Labels: map[string]string{afev1.LabelUser: "0:0"}}, wantErr: true},
		"an empty label and user": {c: enginespec.Container{Labels: map[string]string{afev1.LabelUser: ""}}, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			uid, gid, err := ContainerUser(tc.spec, &tc.c)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v", err)
			}
			if diff := cmp.Diff(tc.want, result{uid, gid}); diff != "" && !tc.wantErr {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		})
	}
}

// A sandbox without spec.user runs as its allocated id, carries it in
// afe.uid, and owns its workspace with it, a Folder's too; one with a user
// carries no label.
func TestContainerRunsAsTheAllocatedID(t *testing.T) {
	for _, ws := range []afev1.WorkspaceType{afev1.WorkspaceVolume, afev1.WorkspaceFolder} {
		sbx := &afev1.Sandbox{}
		sbx.Namespace, sbx.Name, sbx.UID = "ns", "s", "u"
		sbx.Spec.Image = "img"
		sbx.Spec.Resources.Pids = 64
		sbx.Spec.Workspace.Type = ws
		id := IdentityOf(sbx, "default")
		c := Container(sbx, id, Resolved{Workspace: "/w", User: "1900000007:1900000007"})
		if c.User != "1900000007:1900000007" || c.Labels[afev1.LabelUser] != c.User {
			t.Fatalf("%s: user %q, label %q", ws, c.User, c.Labels[afev1.LabelUser])
		}
		if o := c.Mounts[0].Owner; o == nil || o.UID != 1900000007 || o.GID != 1900000007 {
			t.Fatalf("%s: workspace owner %+v", ws, o)
		}
		other := Container(sbx, id, Resolved{Workspace: "/w", User: "1900000008:1900000008"})
		if Hash(other) == Hash(c) {
			t.Fatalf("%s: another id, the same spec hash", ws)
		}
		sbx.Spec.User = "1000:1000"
		c = Container(sbx, id, Resolved{Workspace: "/w", User: "1900000007:1900000007"})
		if c.User != "1000:1000" || c.Labels[afev1.LabelUser] != "" {
			t.Fatalf("%s: with spec.user: user %q, label %q", ws, c.User, c.Labels[afev1.LabelUser])
		}
		if o := c.Mounts[0].Owner; ws == afev1.WorkspaceFolder && o != nil {
			t.Fatalf("a Folder of a named user was given an owner: %+v", o)
		}
	}
}
