package builtin

import (
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"afe.dev/sandbox/internal/runexec"
)

func TestCheckParses(t *testing.T) {
	a, integ, base := hx('a'), hx('9'), hx('0')
	tests := map[string]struct {
		out     string
		want    *Check
		invalid string
	}{
		"complete": {
			out: "afe-check lane a " + a + " in\nafe-check lane b - out\nafe-check integration " + integ + "\nafe-check base " + base + " in\nafe-check done\n",
			want: &Check{Lanes: []LaneState{{"a", a, true}, {"b", "", false}},
				Integration: integ, Base: base, BaseIn: true, Done: true},
		},
		"no integration branch": {
			out:  "afe-check lane a " + a + " out\nafe-check lane b " + a + " out\nafe-check integration -\nafe-check base - out\nafe-check done\n",
			want: &Check{Lanes: []LaneState{{"a", a, false}, {"b", a, false}}, Done: true},
		},
		"unfinished": {
			out:  "afe-check lane a " + a + " in\n",
			want: &Check{Lanes: []LaneState{{"a", a, true}}},
		},
		"a lane out of order":  {out: "afe-check lane b - out\n", invalid: "line 1 is not a line of the check"},
		"a lane not the Run's": {out: "afe-check lane a - out\nafe-check lane x - out\n", invalid: "line 2 is not"},
		"a lane twice":         {out: "afe-check lane a - out\nafe-check lane a - out\n", invalid: "line 2 is not"},
		"integration early":    {out: "afe-check lane a - out\nafe-check integration -\n", invalid: "line 2 is not"},
		"a short commit":       {out: "afe-check lane a abc in\n", invalid: "line 1 is not"},
		"neither in nor out":   {out: "afe-check lane a - maybe\n", invalid: "line 1 is not"},
		"noise":                {out: "fatal: oops\n", invalid: "line 1 is not"},
		"after done": {
			out:     "afe-check lane a - out\nafe-check lane b - out\nafe-check integration -\nafe-check base - out\nafe-check done\nafe-check done\n",
			invalid: "line 6 is not"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := NewCheck([]string{"a", "b"})
			feed(c, tc.out)
			if got := c.Invalid(); !strings.Contains(got, tc.invalid) || (tc.invalid == "") != (got == "") {
				t.Fatalf("Invalid() = %q, want %q", got, tc.invalid)
			}
			if tc.want == nil {
				return
			}
			type seen struct {
				Lanes             []LaneState
				Integration, Base string
				BaseIn, Done      bool
			}
			want := seen{tc.want.Lanes, tc.want.Integration, tc.want.Base, tc.want.BaseIn, tc.want.Done}
			if d := cmp.Diff(want, seen{c.Lanes, c.Integration, c.Base, c.BaseIn, c.Done}); d != "" {
				t.Fatalf("(-want +got):\n%s", d)
			}
		})
	}
}

// Every commit of the outcome is checked against the repository: a report
// that says anything the repository does not is refused.
func TestVerify(t *testing.T) {
	a, b, c, base, integ := hx('a'), hx('b'), hx('c'), hx('0'), hx('9')
	merged := "afe-builtin committed a " + a + "\nafe-builtin base " + base + "\nafe-builtin merged a " + a +
		"\nafe-builtin merged b " + b + "\nafe-builtin merged c " + c + "\nafe-builtin integration " + integ + "\nafe-builtin done merged\n"
	conflict := "afe-builtin base " + base + "\nafe-builtin merged a " + a + "\nafe-builtin conflict b " + b +
		"\nafe-builtin file b x\nafe-builtin integration " + integ + "\nafe-builtin done conflict\n"
	check := func(lanes ...string) string {
		var s strings.Builder
		for _, l := range lanes {
			s.WriteString("afe-check lane " + l + "\n")
		}
		return s.String()
	}
	end := "afe-check integration " + integ + "\nafe-check base " + base + " in\nafe-check done\n"
	tests := map[string]struct {
		report, check string
		code          int
		want          string
	}{
		"merged":   {merged, check("a "+a+" in", "b "+b+" in", "c "+c+" in") + end, 0, ""},
		"conflict": {conflict, check("a "+a+" in", "b "+b+" out", "c "+c+" out") + end, 0, ""},
		"a merged lane is not in the integration branch": {merged, check("a "+a+" in", "b "+b+" out", "c "+c+" in") + end, 0,
			"it says lane b was merged, but " + b + " is not in the integration branch"},
		"a merged lane's branch moved": {merged, check("a "+a+" in", "b "+c+" in", "c "+c+" in") + end, 0,
			"it says lane b was merged at " + b + ", but its branch is at " + c},
		"a committed lane's branch is gone": {merged, check("a - out", "b "+b+" in", "c "+c+" in") + end, 0,
			"it says lane a was committed as " + a + ", but its branch is missing"},
		"a conflicting lane is in the integration branch": {conflict, check("a "+a+" in", "b "+b+" in", "c - out") + end, 0,
			"it says lane b conflicted, but " + b + " is in the integration branch"},
		"a conflicting lane's branch moved": {conflict, check("a "+a+" in", "b "+a+" in", "c - out") + end, 0,
			"it says lane b conflicted at " + b + ", but its branch is at " + a},
		"another integration commit": {merged,
			check("a "+a+" in", "b "+b+" in", "c "+c+" in") + "afe-check integration " + c + "\nafe-check base " + base + " in\nafe-check done\n", 0,
			"it says the integration branch is at " + integ + ", but it is at " + c},
		"another base": {merged,
			check("a "+a+" in", "b "+b+" in", "c "+c+" in") + "afe-check integration " + integ + "\nafe-check base " + c + " in\nafe-check done\n", 0,
			"it says the base is " + base + ", but baseRef is at " + c},
		"the base is not in the integration branch": {merged,
			check("a "+a+" in", "b "+b+" in", "c "+c+" in") + "afe-check integration " + integ + "\nafe-check base " + base + " out\nafe-check done\n", 0,
			"the base " + base + " is not in the integration branch"},
		"the check did not finish": {merged, check("a " + a + " in"), 0, "ended with exit code 0 before it finished"},
		"the check failed":         {merged, check("a "+a+" in", "b "+b+" in", "c "+c+" in") + end, 137, "ended with exit code 137"},
		"the check is unreadable":  {merged, "junk\n", 0, "the check of the repository is unreadable: line 1 is not a line of the check"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			lanes := []string{"a", "b", "c"}
			r := NewReport(lanes)
			feed(r, tc.report)
			if r.Invalid() != "" || !r.Done {
				t.Fatalf("report: %q", r.Invalid())
			}
			chk := NewCheck(lanes)
			feed(chk, tc.check)
			got := r.Verify(chk, tc.code)
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Fatalf("Verify() = %q, want %q", got, tc.want)
			}
		})
	}
}

// The check's group is no attempt's group, never the sandbox's, and one the
// engine accepts.
func TestCheckGID(t *testing.T) {
	for i := 0; i < 20000; i++ {
		uid := "run-" + strconv.Itoa(i)
		if g := runexec.GID(uid, int32(i%5)); g >= checkGIDBase {
			t.Fatalf("attempt group %d is in the checks' range", g)
		}
		g := CheckGID(uid, int32(i%5), 1000)
		if g < checkGIDBase || g > 1<<31-2 {
			t.Fatalf("check group %d out of range", g)
		}
		if CheckGID(uid, int32(i%5), g) == g {
			t.Fatalf("check group %d is the sandbox's", g)
		}
	}
	if CheckGID("u", 1, 1000) == CheckGID("u", 2, 1000) {
		t.Fatalf("two attempts share a check group")
	}
}
