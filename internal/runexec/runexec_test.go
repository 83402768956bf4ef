package runexec

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestResults(t *testing.T) {
	huge := `{"big":"` + strings.Repeat("x", MaxResultLine) + `"}`
	tests := map[string]struct {
		writes []string
		want   map[string]string
	}{
		"none":                 {writes: []string{"hello\nworld\n"}},
		"one object":           {writes: []string{`{"a":1,"b":"x"}` + "\n"}, want: map[string]string{"a": "1", "b": `"x"`}},
		"last object wins":     {writes: []string{`{"a":1}` + "\nnoise\n" + `{"b":2}` + "\nmore noise\n"}, want: map[string]string{"b": "2"}},
		"array is not":         {writes: []string{`{"a":1}` + "\n[1,2]\n"}, want: map[string]string{"a": "1"}},
		"scalar is not":        {writes: []string{`{"a":1}` + "\n42\n\"s\"\nnull\n"}, want: map[string]string{"a": "1"}},
		"two objects on line":  {writes: []string{`{"a":1}` + "\n" + `{"b":2} {"c":3}` + "\n"}, want: map[string]string{"a": "1"}},
		"invalid json":         {writes: []string{`{"a":1}` + "\n{not json}\n"}, want: map[string]string{"a": "1"}},
		"no final newline":     {writes: []string{"x\n", `{"z":true}`}, want: map[string]string{"z": "true"}},
		"split across writes":  {writes: []string{`{"sp`, `lit":`, `"yes"}`, "\n"}, want: map[string]string{"split": `"yes"`}},
		"space around":         {writes: []string{"  {\"a\": [1, 2]}  \n"}, want: map[string]string{"a": "[1,2]"}},
		"nested":               {writes: []string{`{"a":{"b":{"c":1}}}` + "\n"}, want: map[string]string{"a": `{"b":{"c":1}}`}},
		"huge line is skipped": {writes: []string{`{"a":1}` + "\n" + huge + "\n"}, want: map[string]string{"a": "1"}},
		"huge then object":     {writes: []string{huge[:1000], huge[1000:] + "\n" + `{"after":1}` + "\n"}, want: map[string]string{"after": "1"}},
		"crlf":                 {writes: []string{"{\"a\":1}\r\n"}, want: map[string]string{"a": "1"}},
		"a bracket after":      {writes: []string{`{"a":1}` + "\n" + `{"b":2}]` + "\n"}, want: map[string]string{"a": "1"}},
		"empty object":         {writes: []string{`{"a":1}` + "\n{}\n"}, want: map[string]string{}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var r Results
			for _, w := range tc.writes {
				_, _ = r.Write([]byte(w))
			}
			last := r.Last()
			if last.Refused != "" {
				t.Fatalf("refused: %s", last.Refused)
			}
			if d := cmp.Diff(tc.want, fieldStrings(last.Fields)); d != "" {
				t.Fatal(d)
			}
		})
	}
}

// fieldStrings is a result's fields as strings (nil for none).
func fieldStrings(fields map[string]json.RawMessage) map[string]string {
	if fields == nil {
		return nil
	}
	got := map[string]string{}
	for k, v := range fields {
		got[k] = string(v)
	}
	return got
}

// nested is an object whose key "a" holds arrays, depth levels in all
// (the object's own counting), around a 1.
func nested(depth int) string {
	return `{"a":` + strings.Repeat("[", depth-1) + "1" + strings.Repeat("]", depth-1) + "}"
}

// A result enters the status re-encoded, at most MaxResultDepth deep and
// MaxResultBytes large; past either it is refused, and the refusal is the
// last result (an earlier object does not stand in for it).
func TestResultBounds(t *testing.T) {
	// A line within MaxResultLine whose strings re-encode larger: each
	// byte that is not UTF-8 becomes U+FFFD, three bytes.
	grows := `{"a":"` + strings.Repeat("\xff", 30_000) + `"}`
	fits := `{"a":"` + strings.Repeat("x", MaxResultBytes-len(`{"a":""}`)) + `"}`
	tests := map[string]struct {
		line    string
		want    map[string]string
		refused string // a substring of the reason; empty: taken
	}{
		"64 levels are taken":                  {line: nested(64), want: map[string]string{"a": nested(64)[5 : len(nested(64))-1]}},
		"65 levels are refused":                {line: nested(65), refused: "nests 65 levels deep, more than 64"},
		"the issue's 9,997 levels are refused": {line: nested(9_997), refused: "nests 9997 levels deep"},
		"deeper than the decoder's own limit":  {line: nested(20_000), refused: "nests 20000 levels deep"},
		"objects count as levels": {line: `{"a":` + strings.Repeat(`{"b":`, 64) + "1" + strings.Repeat("}", 65),
			refused: "nests 65 levels deep"},
		"brackets in strings are no levels": {line: `{"s":"` + strings.Repeat("[{", 100) + `\"[{"}`,
			want: map[string]string{"s": `"` + strings.Repeat("[{", 100) + `\"[{"`}},
		"a deep line that is no JSON is no result": {line: `{"a":` + strings.Repeat("[", 100) + "x"},
		"a deep array is no object":                {line: strings.Repeat("[", 100) + strings.Repeat("]", 100)},
		"re-encoded compactly, HTML as is": {line: `{ "a" : [ 1 , 2 ], "b": {"c" : "<&>"}, "u": "\u00e9" }`,
			want: map[string]string{"a": "[1,2]", "b": `{"c":"<&>"}`, "u": `"é"`}},
		"numbers as written":     {line: `{"i":12345678901234567890,"f":1.50,"e":-2E-3}`, want: map[string]string{"i": "12345678901234567890", "f": "1.50", "e": "-2E-3"}},
		"a number past float64":  {line: `{"ok":1,"deep":[{"n":1e400}]}`, refused: "number 1e400 is out of range"},
		"the last duplicate key": {line: `{"a":1,"a":2}`, want: map[string]string{"a": "2"}},
		"exactly the size bound": {line: fits, want: map[string]string{"a": fits[5 : len(fits)-1]}},
		"past it by a byte that grows": {line: `{"a":"` + strings.Repeat("x", MaxResultBytes-len(`{"a":""}`)-1) + "\xff" + `"}`,
			refused: "65538 bytes re-encoded, more than 65536"},
		"growing past it re-encoded": {line: grows, refused: "90008 bytes re-encoded, more than 65536"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			for _, before := range []string{"", `{"earlier":true}` + "\n"} {
				var r Results
				_, _ = r.Write([]byte(before + tc.line + "\n"))
				got := r.Last()
				switch {
				case tc.refused != "":
					if !strings.Contains(got.Refused, tc.refused) || got.Fields != nil {
						t.Fatalf("got %q (fields %v), want refused with %q", got.Refused, got.Fields, tc.refused)
					}
				case tc.want == nil && before != "":
					if d := cmp.Diff(map[string]string{"earlier": "true"}, fieldStrings(got.Fields)); d != "" || got.Refused != "" {
						t.Fatalf("refused %q; %s", got.Refused, d)
					}
				default:
					if got.Refused != "" {
						t.Fatalf("refused: %s", got.Refused)
					}
					if d := cmp.Diff(tc.want, fieldStrings(got.Fields)); d != "" {
						t.Fatal(d)
					}
				}
			}
		})
	}
}

func TestTail(t *testing.T) {
	tail := &Tail{Limit: 10}
	_, _ = tail.Write([]byte("hello "))
	if tail.String() != "hello " || tail.Truncated() {
		t.Fatalf("%q %v", tail.String(), tail.Truncated())
	}
	_, _ = tail.Write([]byte("wonderful world"))
	if tail.String() != "rful world" || !tail.Truncated() {
		t.Fatalf("%q %v", tail.String(), tail.Truncated())
	}
	// A multi-byte rune cut by the limit is dropped, not half-kept.
	u := &Tail{Limit: 5}
	_, _ = u.Write([]byte("ééé")) // 6 bytes
	if got := u.String(); got != "éé" {
		t.Fatalf("%q", got)
	}
	big := &Tail{Limit: 32 << 10}
	for i := 0; i < 64; i++ {
		_, _ = big.Write([]byte(strings.Repeat(string(rune('a'+i%26)), 32<<10)))
	}
	if s := big.String(); len(s) != 32<<10 || s[len(s)-1] != byte('a'+63%26) {
		t.Fatalf("len %d", len(s))
	}
}

func TestGID(t *testing.T) {
	a, b := GID("uid-1", 1), GID("uid-1", 2)
	if a == b || a < gidBase || a >= gidBase+gidSpan || GID("uid-1", 1) != a {
		t.Fatalf("%d %d", a, b)
	}
}

func TestCommand(t *testing.T) {
	if d := cmp.Diff([]string{"/bin/sh", "-c", "echo hi"}, Command(nil, "echo hi")); d != "" {
		t.Fatal(d)
	}
	if d := cmp.Diff([]string{"true"}, Command([]string{"true"}, "")); d != "" {
		t.Fatal(d)
	}
}

func TestParseObject(t *testing.T) {
	res, ok := ParseObject([]byte(`{"ok": true, "n": 3}`))
	if !ok || res.Refused != "" || string(res.Fields["ok"]) != "true" {
		t.Fatal(res, ok)
	}
	var v any
	if err := json.Unmarshal(res.Fields["n"], &v); err != nil || v.(float64) != 3 {
		t.Fatal(err, v)
	}
}
