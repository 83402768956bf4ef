package sandboxspec

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/runexec"
)

func TestParseIDRanges(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    IDRanges
		wantErr bool
	}{
		"empty":             {in: ""},
		"only commas":       {in: " , ,"},
		"one id":            {in: "70000", want: IDRanges{{70000, 70000}}},
		"range and id":      {in: "1000-65535,70000", want: IDRanges{{1000, 65535}, {70000, 70000}}},
		"spaces":            {in: " 1000 - 1999 , 5 ", want: IDRanges{{1000, 1999}, {5, 5}}},
		"one-id range":      {in: "7-7", want: IDRanges{{7, 7}}},
		"largest id":        {in: "2147483646", want: IDRanges{{2147483646, 2147483646}}},
		"zero":              {in: "0", wantErr: true},
		"range from zero":   {in: "0-100", wantErr: true},
		"beyond the last":   {in: "2147483647", wantErr: true},
		"reversed":          {in: "2000-1000", wantErr: true},
		"open range":        {in: "1000-", wantErr: true},
		"negative":          {in: "-5", wantErr: true},
		"name":              {in: "docker", wantErr: true},
		"sign":              {in: "+5", wantErr: true},
		"two dashes":        {in: "1-2-3", wantErr: true},
		"eleven digits":     {in: "00000000001", wantErr: true},
		"hex":               {in: "0x10", wantErr: true},
		"one bad among ok":  {in: "1000-2000,x", wantErr: true},
		"newline inside id": {in: "10\n00", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseIDRanges(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
			if err == nil && len(got) > 0 {
				again, err := ParseIDRanges(got.String())
				if err != nil || cmp.Diff(got, again) != "" {
					t.Fatalf("String %q does not parse back: %v", got.String(), err)
				}
			}
		})
	}
}

func TestIDRangesAllows(t *testing.T) {
	r := IDRanges{{1000, 1999}, {5000, 5000}}
	tests := map[string]struct {
		ranges IDRanges
		id     int
		want   bool
	}{
		"empty allows any":   {ranges: nil, id: 123456, want: true},
		"first of a range":   {ranges: r, id: 1000, want: true},
		"last of a range":    {ranges: r, id: 1999, want: true},
		"before a range":     {ranges: r, id: 999, want: false},
		"after a range":      {ranges: r, id: 2000, want: false},
		"single id":          {ranges: r, id: 5000, want: true},
		"next to single id":  {ranges: r, id: 5001, want: false},
		"between the ranges": {ranges: r, id: 3000, want: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := tc.ranges.Allows(tc.id); got != tc.want {
				t.Fatalf("Allows(%d) = %v", tc.id, got)
			}
		})
	}
}

func TestValidateUser(t *testing.T) {
	policy := Options{
		DenyGIDs:    []int{27, 105},
		AllowedUIDs: IDRanges{{1000, 65535}},
		AllowedGIDs: IDRanges{{100, 65535}},
	}
	type result struct {
		UID, GID int
		Reason   string
	}
	tests := map[string]struct {
		user string
		opts Options
		want result
	}{
		"allowed":                      {user: "1000:1000", opts: policy, want: result{1000, 1000, ""}},
		"uid only takes its gid":       {user: "2000", opts: policy, want: result{2000, 2000, ""}},
		"no policy allows any":         {user: "7:105", want: result{7, 105, ""}},
		"root":                         {user: "0", opts: policy, want: result{Reason: afev1.InvalidSpecReason}},
		"root's group":                 {user: "1000:0", opts: policy, want: result{Reason: afev1.InvalidSpecReason}},
		"a name":                       {user: "docker", opts: policy, want: result{Reason: afev1.InvalidSpecReason}},
		"the socket's group":           {user: "1000:105", opts: policy, want: result{Reason: afev1.UserNotAllowedReason}},
		"padded socket's group":        {user: "1000:00105", opts: policy, want: result{Reason: afev1.UserNotAllowedReason}},
		"denied gid as uid only":       {user: "27", opts: Options{DenyGIDs: []int{27}}, want: result{Reason: afev1.UserNotAllowedReason}},
		"denied gid without ranges":    {user: "1000:27", opts: Options{DenyGIDs: []int{27}}, want: result{Reason: afev1.UserNotAllowedReason}},
		"uid outside the ranges":       {user: "999:1000", opts: policy, want: result{Reason: afev1.UserNotAllowedReason}},
		"gid outside the ranges":       {user: "1000:99", opts: policy, want: result{Reason: afev1.UserNotAllowedReason}},
		"gid above the ranges":         {user: "1000:65536", opts: policy, want: result{Reason: afev1.UserNotAllowedReason}},
		"a Run group":                  {user: "1000:2000000000", want: result{Reason: afev1.UserNotAllowedReason}},
		"the last Run group":           {user: "1000:2099999999", want: result{Reason: afev1.UserNotAllowedReason}},
		"above the Run groups: checks": {user: "1000:2100000000", want: result{0, 0, afev1.UserNotAllowedReason}},
		"below the Run groups":         {user: "1000:1999999999", want: result{1000, 1999999999, ""}},
		"a Run group as uid only":      {user: "2000000123", want: result{Reason: afev1.UserNotAllowedReason}},
		"an id of --sandbox-id-range":  {user: "1900000005", want: result{Reason: afev1.UserNotAllowedReason}},
		"a gid of --sandbox-id-range":  {user: "1000:1900065535", want: result{Reason: afev1.UserNotAllowedReason}},
		"a uid of a range set":         {user: "50:1000", opts: Options{SandboxIDs: IDRange{10, 50}}, want: result{Reason: afev1.UserNotAllowedReason}},
		"beside a range set":           {user: "51:9", opts: Options{SandboxIDs: IDRange{10, 50}}, want: result{51, 9, ""}},
		"a Run group allowed by range": {user: "1000:2000000001", opts: Options{AllowedGIDs: IDRanges{{1, 2147483646}}}, want: result{Reason: afev1.UserNotAllowedReason}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			uid, gid, err := ValidateUser(tc.user, tc.opts)
			got := result{UID: uid, GID: gid}
			if err != nil {
				ie, ok := AsInvalid(err)
				if !ok {
					t.Fatalf("not an InvalidError: %v", err)
				}
				got.Reason = ie.Reason
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("(-want +got):\n%s\nerr: %v", diff, err)
			}
		})
	}
	if runexec.GIDMin != 2_000_000_000 || runexec.GIDMax != 2_099_999_999 {
		t.Fatalf("the Run groups moved (%d-%d): update the table", runexec.GIDMin, runexec.GIDMax)
	}
}

// Validate applies the user policy: a denied gid ends in UserNotAllowed.
func TestValidateAppliesTheUserPolicy(t *testing.T) {
	spec := validSpec()
	spec.User = "1000:105"
	err := Validate(&spec, Options{DenyGIDs: []int{105}})
	ie, ok := AsInvalid(err)
	if !ok || ie.Reason != afev1.UserNotAllowedReason {
		t.Fatalf("Validate = %v, want %s", err, afev1.UserNotAllowedReason)
	}
	spec.User = "1000:1000"
	if err := Validate(&spec, Options{AllowedUIDs: IDRanges{{2000, 3000}}}); err == nil {
		t.Fatal("a uid outside --allowed-uids passed Validate")
	}
}

// The container is always given uid:gid, never a bare uid: with a bare uid
// the engine adds the groups the image's /etc/group gives that user (and
// takes the primary group from the image's /etc/passwd), measured on Docker
// 20.10 with runc.
func TestContainerUserAlwaysNamesTheGroup(t *testing.T) {
	for user, want := range map[string]string{"1234": "1234:1234", "01000": "1000:1000", "1000:2000": "1000:2000"} {
		sbx := testSandbox()
		sbx.Spec.User = user
		if got := Container(sbx, IdentityOf(sbx, "default"), Resolved{Workspace: "v"}).User; got != want {
			t.Fatalf("user %q: container user %q, want %q", user, got, want)
		}
	}
}
