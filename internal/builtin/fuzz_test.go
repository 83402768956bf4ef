package builtin

import (
	"encoding/json"
	"reflect"
	"testing"
)

// The report comes from a script in the sandbox, whose workload may write
// anything: whatever the bytes and however they are cut, the parser gives
// the same report, keeps its limits, and the result is valid JSON.
func FuzzReport(f *testing.F) {
	f.Add([]byte("afe-builtin committed a 0123\nafe-builtin base 4567\nafe-builtin merged a 89ab\nafe-builtin integration cdef\nafe-builtin done merged\n"), uint8(3))
	f.Add([]byte("afe-builtin conflict b 2\nafe-builtin file b \"we\\\\ird\\tname\"\nafe-builtin done conflict\n"), uint8(1))
	f.Add([]byte("afe-builtin error ref-not-found lane x\nnoise\nafe-builtin\n"), uint8(7))
	f.Fuzz(func(t *testing.T, out []byte, chunk uint8) {
		whole := &Report{}
		_, _ = whole.Write(out)
		cut := &Report{}
		size := int(chunk%16) + 1
		for i := 0; i < len(out); i += size {
			_, _ = cut.Write(out[i:min(i+size, len(out))])
		}
		if a, b := parsed(whole), parsed(cut); !reflect.DeepEqual(a, b) {
			t.Fatalf("cut in pieces of %d: %+v, at once: %+v", size, b, a)
		}
		if whole.Conflict != nil && len(whole.Conflict.Files) > MaxConflictFiles {
			t.Fatalf("%d conflict files", len(whole.Conflict.Files))
		}
		o, _ := whole.Outcome("integration", &CI{ExitCode: 1, Output: string(out)})
		for k, v := range Fields(o) {
			if !json.Valid(v) {
				t.Fatalf("result key %s is not JSON: %s", k, v)
			}
		}
	})
}

// parsed is what a report says, without its parser state.
func parsed(r *Report) []any {
	return []any{r.Base, r.Merged, r.Committed, r.Conflict, r.Integration, r.Done, r.Failure}
}
