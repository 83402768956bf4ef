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
		"space around":         {writes: []string{"  {\"a\": [1, 2]}  \n"}, want: map[string]string{"a": "[1, 2]"}},
		"nested":               {writes: []string{`{"a":{"b":{"c":1}}}` + "\n"}, want: map[string]string{"a": `{"b":{"c":1}}`}},
		"huge line is skipped": {writes: []string{`{"a":1}` + "\n" + huge + "\n"}, want: map[string]string{"a": "1"}},
		"huge then object":     {writes: []string{huge[:1000], huge[1000:] + "\n" + `{"after":1}` + "\n"}, want: map[string]string{"after": "1"}},
		"crlf":                 {writes: []string{"{\"a\":1}\r\n"}, want: map[string]string{"a": "1"}},
		"empty object":         {writes: []string{`{"a":1}` + "\n{}\n"}, want: map[string]string{}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var r Results
			for _, w := range tc.writes {
				_, _ = r.Write([]byte(w))
			}
			got := map[string]string(nil)
			if last := r.Last(); last != nil {
				got = map[string]string{}
				for k, v := range last {
					got[k] = string(v)
				}
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Fatal(d)
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
	obj, ok := ParseObject([]byte(`{"ok": true, "n": 3}`))
	if !ok || string(obj["ok"]) != "true" {
		t.Fatal(obj, ok)
	}
	var v any
	if err := json.Unmarshal(obj["n"], &v); err != nil || v.(float64) != 3 {
		t.Fatal(err, v)
	}
}
