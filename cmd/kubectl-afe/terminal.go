package main

import (
	"fmt"
	"io"
	"os"
	"unicode/utf8"

	"golang.org/x/term"
)

// What the plugin prints of a Run (its output, its messages) was written by
// the workload, which is hostile: on a terminal it could move the cursor,
// rewrite lines, set the window title or write the clipboard (OSC 52). So
// output written to a terminal shows every control as text, spelled as in a
// Go string literal; output written anywhere else (a pipe, a file) is passed
// on byte for byte.

// outputFor is f as the plugin writes to it: escaped when f is a terminal,
// unchanged otherwise.
func outputFor(f *os.File) io.Writer {
	return forTerminal(f, term.IsTerminal(int(f.Fd())))
}

// forTerminal wraps w in an escaper when it is a terminal.
func forTerminal(w io.Writer, terminal bool) io.Writer {
	if !terminal {
		return w
	}
	return escaper{w}
}

// escaper escapes each Write on its own. The plugin writes whole messages,
// so a character is never split between two writes; if one were, its bytes
// would be shown escaped, never passed on raw.
type escaper struct{ w io.Writer }

func (e escaper) Write(p []byte) (int, error) {
	if _, err := e.w.Write(escapeControls(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// short are the controls with a one-letter escape in Go.
var short = map[rune]string{'\a': `\a`, '\b': `\b`, '\f': `\f`, '\r': `\r`, '\v': `\v`}

// escapeControls spells out what a terminal could act on: C0 controls except
// newline and tab (a carriage return too: alone it lets a line hide what came
// before it), DEL, C1 controls (U+0080 to U+009F, which some terminals obey
// like ESC sequences), and bytes that are not UTF-8 (a terminal in another
// encoding could read them as C1). Escapes are as in a Go string literal:
// `\r`, `\x1b`, `\u009b` for a C1 character, `\xff` for a byte that is not
// UTF-8. A backslash is left as it is: the view is for reading, a pipe gives
// the exact bytes.
func escapeControls(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		switch {
		case r == utf8.RuneError && size == 1:
			out = fmt.Appendf(out, `\x%02x`, b[0])
		case r == '\n' || r == '\t':
			out = append(out, b[0])
		case short[r] != "":
			out = append(out, short[r]...)
		case r < 0x20 || r == 0x7f:
			out = fmt.Appendf(out, `\x%02x`, r)
		case r >= 0x80 && r <= 0x9f:
			out = fmt.Appendf(out, `\u%04x`, r)
		default:
			out = append(out, b[:size]...)
		}
		b = b[size:]
	}
	return out
}
