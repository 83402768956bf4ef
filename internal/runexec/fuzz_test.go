package runexec

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// reference: the last line (of at most MaxResultLine bytes) that is exactly
// one JSON object.
func reference(out []byte) map[string]json.RawMessage {
	var last map[string]json.RawMessage
	for _, line := range bytes.Split(out, []byte("\n")) {
		if len(line) > MaxResultLine {
			continue
		}
		trimmed := bytes.TrimSpace(line)
		if len(trimmed) == 0 || trimmed[0] != '{' {
			continue
		}
		var obj map[string]json.RawMessage
		dec := json.NewDecoder(bytes.NewReader(trimmed))
		if dec.Decode(&obj) != nil || obj == nil || dec.More() {
			continue
		}
		last = obj
	}
	return last
}

// Results agrees with the reference however the output is split into
// writes.
func FuzzResults(f *testing.F) {
	f.Add([]byte(`{"a":1}`+"\nnoise\n"+`{"b":[1,2]}`), uint8(3))
	f.Add([]byte("no json at all\n"), uint8(1))
	f.Add([]byte(`{"a":1} {"b":2}`+"\n[1]\n"), uint8(7))
	f.Fuzz(func(t *testing.T, out []byte, chunk uint8) {
		size := int(chunk%16) + 1
		var r Results
		for i := 0; i < len(out); i += size {
			_, _ = r.Write(out[i:min(i+size, len(out))])
		}
		got, want := r.Last(), reference(out)
		if len(got) == 0 && len(want) == 0 {
			if (got == nil) != (want == nil) {
				t.Fatalf("got %v, want %v", got, want)
			}
			return
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("got %v, want %v", got, want)
		}
	})
}

// The tail keeps exactly the last Limit bytes (as valid UTF-8).
func FuzzTail(f *testing.F) {
	f.Add([]byte("hello wonderful world"), uint8(5))
	f.Fuzz(func(t *testing.T, data []byte, limit uint8) {
		tail := &Tail{Limit: int(limit%64) + 1}
		for i := 0; i < len(data); i += 3 {
			_, _ = tail.Write(data[i:min(i+3, len(data))])
		}
		if len(tail.String()) > tail.Limit*3 {
			t.Fatalf("tail of %d bytes with limit %d", len(tail.String()), tail.Limit)
		}
		if tail.Truncated() != (len(data) > tail.Limit) {
			t.Fatalf("truncated=%v for %d bytes, limit %d", tail.Truncated(), len(data), tail.Limit)
		}
		out := tail.String()
		if !utf8.ValidString(out) {
			t.Fatalf("tail %q is not valid UTF-8", out)
		}
		if utf8.Valid(data) {
			// Valid output stays itself: its end, cut at a rune boundary
			// (at most 3 bytes of a cut rune dropped).
			if !strings.HasSuffix(string(data), out) {
				t.Fatalf("tail %q is not the end of %q", out, data)
			}
			if want := min(len(data), tail.Limit); len(out) < want-3 || len(out) > want {
				t.Fatalf("tail of %d bytes, want %d (limit %d, %d written)", len(out), want, tail.Limit, len(data))
			}
		}
	})
}
