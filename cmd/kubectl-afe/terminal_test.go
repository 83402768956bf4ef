package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"

	"afe.dev/sandbox/client"
)

func TestEscapeControls(t *testing.T) {
	tests := map[string]struct {
		in, want string
	}{
		"plain text":                  {"hello, world", "hello, world"},
		"newlines and tabs":           {"a\tb\nc\n\n", "a\tb\nc\n\n"},
		"UTF-8 text":                  {"héllo wörld ✓ 日本 🙂", "héllo wörld ✓ 日本 🙂"},
		"the replacement character":   {"\uFFFD", "\uFFFD"},
		"a backslash stays":           {`C:\x1b`, `C:\x1b`},
		"ESC alone":                   {"\x1b", `\x1b`},
		"CSI: clear the screen":       {"\x1b[2J\x1b[H", `\x1b[2J\x1b[H`},
		"CSI: colour":                 {"\x1b[31mred\x1b[0m", `\x1b[31mred\x1b[0m`},
		"OSC 52 clipboard write, BEL": {"\x1b]52;c;aGk=\x07", `\x1b]52;c;aGk=\a`},
		"OSC 52 clipboard write, ST":  {"\x1b]52;c;aGk=\x1b\\", `\x1b]52;c;aGk=\x1b\`},
		"OSC title":                   {"\x1b]0;owned\x07", `\x1b]0;owned\a`},
		"BEL":                         {"ding\a", `ding\a`},
		"carriage return hides text":  {"rm -rf /\rls      ", `rm -rf /\rls      `},
		"CRLF":                        {"line\r\n", "line\\r\n"},
		"backspace, form feed, VT":    {"a\bb\fc\vd", `a\bb\fc\vd`},
		"NUL and other C0":            {"\x00\x01\x1f", `\x00\x01\x1f`},
		"DEL":                         {"x\x7fy", `x\x7fy`},
		"C1 CSI in UTF-8":             {"\u009b2J", `\u009b2J`},
		"C1 OSC and ST in UTF-8":      {"\u009d52;c;aGk=\u009c", `\u009d52;c;aGk=\u009c`},
		"C1 NEL in UTF-8":             {"a\u0085b", `a\u0085b`},
		"first after C1 is kept":      {"\u00a0\u00e9", "\u00a0\u00e9"},
		"raw C1 byte (not UTF-8)":     {"\x9b2J", `\x9b2J`},
		"invalid UTF-8":               {"\xff\xfe ok", `\xff\xfe ok`},
		"truncated UTF-8":             {"ab\xe2\x9c", `ab\xe2\x9c`},
		"overlong ESC":                {"\xc0\x9b", `\xc0\x9b`},
		"surrogate half":              {"\xed\xa0\x80", `\xed\xa0\x80`},
		"RLO reverses what follows":   {"file\u202etxt.exe", `file\u202etxt.exe`},
		"every bidi control":          {"\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u2066\u2067\u2068\u2069", `\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u2066\u2067\u2068\u2069`},
		"right-to-left text stays":    {"שלום مرحبا", "שלום مرحبا"},
		"a joiner in an emoji stays":  {"👩\u200d💻", "👩\u200d💻"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := string(escapeControls([]byte(tc.in)))
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Fatal(d)
			}
		})
	}
}

// Nothing a terminal acts on survives escaping, whatever the bytes.
func TestEscapeControlsLeavesNoControl(t *testing.T) {
	all := make([]byte, 0, 256*3)
	for b := 0; b < 256; b++ {
		all = append(all, byte(b), 'x')
	}
	for r := rune(0x80); r <= 0x9f; r++ {
		all = append(all, string(r)...)
	}
	for r := range bidi {
		all = append(all, string(r)...)
	}
	for _, r := range string(escapeControls(all)) {
		if (r < 0x20 && r != '\n' && r != '\t') || (r >= 0x7f && r <= 0x9f) || r == 0xFFFD || bidi[r] {
			t.Fatalf("control %U left in the escaped output", r)
		}
	}
}

// On a terminal the writer escapes; to a pipe or a file it passes every byte
// on as it is.
func TestForTerminal(t *testing.T) {
	hostile := []byte("out\x1b]52;c;aGk=\x07\r\u009b\xff\n")
	tests := map[string]struct {
		terminal bool
		want     string
	}{
		"piped: byte for byte": {false, string(hostile)},
		"terminal: escaped":    {true, `out\x1b]52;c;aGk=\a\r\u009b\xff` + "\n"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			n, err := forTerminal(&buf, tc.terminal).Write(hostile)
			if err != nil || n != len(hostile) {
				t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(hostile))
			}
			if d := cmp.Diff(tc.want, buf.String()); d != "" {
				t.Fatal(d)
			}
		})
	}
}

// Run output reaches the terminal in pieces of any size (kubectl afe logs
// copies a stream, and logs -f prints each piece as it comes): however it
// is cut, even inside a character, what the terminal gets is the same
// escaping as of the whole, bidirectional overrides and C1 controls
// included, and the end of output written whole.
func TestForTerminalEscapesOutputInPieces(t *testing.T) {
	hostile := []byte("name\u202etxt.exe \x1b[2J\u009b31m é 🙂\n")
	want := string(escapeControls(hostile))
	if strings.Contains(want, "\u202e") || strings.Contains(want, "\u009b") {
		t.Fatalf("controls left in %q", want)
	}
	for size := 1; size <= len(hostile); size++ {
		var buf bytes.Buffer
		w := forTerminal(&buf, true)
		for p := hostile; len(p) > 0; p = p[min(size, len(p)):] {
			if n, err := w.Write(p[:min(size, len(p))]); err != nil || n != min(size, len(p)) {
				t.Fatalf("Write = %d, %v", n, err)
			}
		}
		flushOutput(w)
		if buf.String() != want {
			t.Fatalf("written %d bytes at a time: %q, want %q", size, buf.String(), want)
		}
	}
	// A character whose end never comes is shown escaped at the end.
	var buf bytes.Buffer
	w := forTerminal(&buf, true)
	_, _ = w.Write([]byte("ab\xe2\x80"))
	flushOutput(w)
	if buf.String() != `ab\xe2\x80` {
		t.Fatalf("an unfinished character: %q", buf.String())
	}
}

// Every way kubectl afe logs and run print a Run's output goes through the
// writer they are given: the status's output (printOutput) and a log's
// stream copied (the finished Run's path and logs -f's, io.Copy into the
// writer, in the stream's pieces).
func TestRunOutputPathsEscapeOnATerminal(t *testing.T) {
	output := "a\u202eb\x1b]0;x\x07\n"
	want := `a\u202eb\x1b]0;x\a` + "\n"

	var status bytes.Buffer
	w := forTerminal(&status, true)
	printOutput(&client.Outcome{Output: output}, w, io.Discard)
	flushOutput(w)
	var stream bytes.Buffer
	w = forTerminal(&stream, true)
	counted := &countingWriter{w: w}
	if _, err := io.Copy(counted, iotest.OneByteReader(strings.NewReader(output))); err != nil {
		t.Fatal(err)
	}
	flushOutput(w)
	for name, got := range map[string]string{"status.output": status.String(), "a log's stream": stream.String()} {
		if got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	if counted.n != int64(len(output)) {
		t.Errorf("counted %d bytes of %d: logs -f would skip or repeat some", counted.n, len(output))
	}
}

// A terminal handed to the sandbox (exec -t, shell) gets the command's
// output as it is: the writer under the escaper.
func TestUnescaped(t *testing.T) {
	var buf bytes.Buffer
	if got := unescaped(forTerminal(&buf, true)); got != &buf {
		t.Errorf("under an escaper: %T, want the terminal itself", got)
	}
	if got := unescaped(&buf); got != &buf {
		t.Errorf("a pipe: %T, want it as it is", got)
	}
}
