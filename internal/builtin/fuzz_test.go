package builtin

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// The report comes from a channel the workload can write to: whatever the
// bytes and however they are cut, the parser gives the same report, keeps
// its bounds, names only the Run's lanes, each once and in order, with hex
// commits, and the result is valid JSON. Verify, fed the same bytes as the
// check's output, accepts only a report whose every commit the check
// confirms.
func FuzzReport(f *testing.F) {
	a, b, base, integ := hx('a'), hx('b'), hx('0'), hx('9')
	f.Add([]byte("afe-builtin committed a "+a+"\nafe-builtin base "+base+"\nafe-builtin merged a "+a+"\nafe-builtin merged b/c "+b+
		"\nafe-builtin merged d "+b+"\nafe-builtin integration "+integ+"\nafe-builtin done merged\n"), uint8(3))
	f.Add([]byte("afe-builtin base "+base+"\nafe-builtin merged a "+a+"\nafe-builtin conflict b/c "+b+"\nafe-builtin file b/c \"we\\\\ird\\tname\"\n"+
		"afe-builtin truncated b/c\nafe-builtin integration "+integ+"\nafe-builtin done conflict\n"), uint8(1))
	f.Add([]byte("afe-builtin error ref-not-found lane d\nnoise\nafe-builtin\n"), uint8(7))
	f.Add([]byte("afe-builtin base "+base+"\nafe-builtin merged a "+a+"\nafe-builtin merged zz-forged "+a+"\n"), uint8(5))
	f.Add([]byte("afe-check lane a "+a+" in\nafe-check lane b/c - out\nafe-check lane d "+b+" in\nafe-check integration "+integ+
		"\nafe-check base "+base+" in\nafe-check done\n"), uint8(2))
	lanes := []string{"a", "b/c", "d"}
	f.Fuzz(func(t *testing.T, out []byte, chunk uint8) {
		whole := NewReport(lanes)
		_, _ = whole.Write(out)
		cut := NewReport(lanes)
		size := int(chunk%16) + 1
		for i := 0; i < len(out); i += size {
			_, _ = cut.Write(out[i:min(i+size, len(out))])
		}
		if a, b := parsed(whole), parsed(cut); !reflect.DeepEqual(a, b) {
			t.Fatalf("cut in pieces of %d: %+v, at once: %+v", size, b, a)
		}
		checkReport(t, whole, lanes)

		chk := NewCheck(lanes)
		_, _ = chk.Write(out)
		if whole.Invalid() == "" && whole.Done && whole.Failure == nil && whole.Verify(chk, 0) == "" {
			at := map[string]LaneState{}
			for _, l := range chk.Lanes {
				at[l.Lane] = l
			}
			for _, m := range whole.Merged {
				if s := at[m.Lane]; s.Commit != m.Commit || !s.In {
					t.Fatalf("verified lane %s at %s, the check says %+v", m.Lane, m.Commit, s)
				}
			}
			if whole.Integration != chk.Integration || whole.Base != chk.Base {
				t.Fatalf("verified %s/%s, the check says %s/%s", whole.Integration, whole.Base, chk.Integration, chk.Base)
			}
		}

		o, _ := whole.Outcome("integration", &CI{ExitCode: 1, Output: string(out)})
		for k, v := range Fields(o) {
			if !json.Valid(v) {
				t.Fatalf("result key %s is not JSON: %s", k, v)
			}
		}
	})
}

// checkReport fails unless r keeps the bounds and names only lanes, in
// order, with hex commits.
func checkReport(t *testing.T, r *Report, lanes []string) {
	t.Helper()
	index := map[string]int{}
	for i, l := range lanes {
		index[l] = i
	}
	last := -1
	for _, c := range r.Committed {
		i, ok := index[c.Lane]
		if !ok || i <= last || !isCommit(c.Commit) {
			t.Fatalf("committed %+v", r.Committed)
		}
		last = i
	}
	if len(r.Merged) > len(lanes) {
		t.Fatalf("%d lanes merged", len(r.Merged))
	}
	for i, m := range r.Merged {
		if m.Lane != lanes[i] || !isCommit(m.Commit) {
			t.Fatalf("merged %+v", r.Merged)
		}
	}
	if c := r.Conflict; c != nil {
		if len(r.Merged) >= len(lanes) || c.Lane != lanes[len(r.Merged)] || !isCommit(r.conflictAt) {
			t.Fatalf("conflict %+v after %+v", c, r.Merged)
		}
		names := 0
		for _, f := range c.Files {
			names += len(f)
		}
		if len(c.Files) > MaxConflictFiles || names > 4*MaxConflictNames {
			t.Fatalf("%d conflict files, %d bytes", len(c.Files), names)
		}
	}
	for _, s := range []string{r.Base, r.Integration} {
		if s != "" && !isCommit(s) {
			t.Fatalf("commit %q", s)
		}
	}
	if r.Invalid() == "" && r.Done && (r.Base == "" || r.Integration == "" || r.Conflict == nil && len(r.Merged) != len(lanes)) {
		t.Fatalf("done without an outcome: %+v", parsed(r))
	}
	if strings.Contains(r.Invalid(), "\n") {
		t.Fatalf("invalid: %q", r.Invalid())
	}
}

// parsed is what a report says, without its parser state.
func parsed(r *Report) []any {
	return []any{r.Base, r.Merged, r.Committed, r.Conflict, r.Integration, r.Done, r.Failure, r.Invalid()}
}
