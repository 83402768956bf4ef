package runexec

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// reference: the last line (of at most MaxResultLine bytes) that is exactly
// one JSON object (nothing after it but space), decoded whole and measured: refused when it nests deeper
// than MaxResultDepth, holds a number past float64, or re-encodes to more
// than MaxResultBytes.
func reference(out []byte) (fields map[string]string, refused bool) {
	for _, line := range bytes.Split(out, []byte("\n")) {
		if len(line) > MaxResultLine {
			continue
		}
		trimmed := bytes.TrimSpace(line)
		if len(trimmed) == 0 || trimmed[0] != '{' {
			continue
		}
		var obj map[string]any
		dec := json.NewDecoder(bytes.NewReader(trimmed))
		dec.UseNumber()
		err := dec.Decode(&obj)
		if err != nil && strings.Contains(err.Error(), "exceeded max depth") {
			// Past Go's own limit (10,000 levels): far past ours.
			fields, refused = nil, true
			continue
		}
		if err != nil || obj == nil || dec.InputOffset() != int64(len(trimmed)) {
			continue
		}
		var whole bytes.Buffer
		enc := json.NewEncoder(&whole)
		enc.SetEscapeHTML(false)
		if enc.Encode(obj) != nil {
			continue
		}
		if depthOf(obj) > MaxResultDepth || numberPastFloat(obj) || whole.Len()-1 > MaxResultBytes {
			fields, refused = nil, true
			continue
		}
		fields, refused = map[string]string{}, false
		for k, v := range obj {
			var b bytes.Buffer
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(false)
			_ = enc.Encode(v)
			fields[k] = strings.TrimSuffix(b.String(), "\n")
		}
	}
	return fields, refused
}

// depthOf is the nesting of objects and arrays in v, by recursion.
func depthOf(v any) int {
	d := 0
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			d = max(d, depthOf(e))
		}
		return d + 1
	case []any:
		for _, e := range v {
			d = max(d, depthOf(e))
		}
		return d + 1
	}
	return 0
}

// numberPastFloat tells whether v holds a number no float64 can hold.
func numberPastFloat(v any) bool {
	switch v := v.(type) {
	case json.Number:
		_, err := v.Float64()
		return err != nil
	case map[string]any:
		for _, e := range v {
			if numberPastFloat(e) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			if numberPastFloat(e) {
				return true
			}
		}
	}
	return false
}

// Results agrees with the reference however the output is split into
// writes.
func FuzzResults(f *testing.F) {
	f.Add([]byte(`{"a":1}`+"\nnoise\n"+`{"b":[1,2]}`), uint8(3))
	f.Add([]byte("no json at all\n"), uint8(1))
	f.Add([]byte(`{"a":1} {"b":2}`+"\n[1]\n"), uint8(7))
	f.Add([]byte(`{"a":1}`+"\n"+nested(MaxResultDepth+1)+"\n"), uint8(5))
	f.Add([]byte(nested(MaxResultDepth)+"\n"+`{"n":1e999}`), uint8(11))
	f.Add([]byte(`{ "a" : "<\u2028>", "b": [ 1.0 ] }`), uint8(2))
	f.Fuzz(func(t *testing.T, out []byte, chunk uint8) {
		size := int(chunk%16) + 1
		var r Results
		for i := 0; i < len(out); i += size {
			_, _ = r.Write(out[i:min(i+size, len(out))])
		}
		got := r.Last()
		want, refused := reference(out)
		if (got.Refused != "") != refused {
			t.Fatalf("refused %q, want refused %v", got.Refused, refused)
		}
		if d := cmp.Diff(want, fieldStrings(got.Fields)); d != "" {
			t.Fatal(d)
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
