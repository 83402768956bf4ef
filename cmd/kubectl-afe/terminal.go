package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"unicode/utf8"

	"golang.org/x/term"
)

// What the plugin prints of a Run (its output, its messages) was written by
// the workload, which is hostile: on a terminal it could move the cursor,
// rewrite lines, set the window title or write the clipboard (OSC 52), or
// reorder what a line shows (bidirectional overrides, U+202E). So output
// written to a terminal shows every control as text, spelled as in a Go
// string literal; output written anywhere else (a pipe, a file) is passed
// on byte for byte.

// outputFor is f as the plugin writes to it: escaped when f is a terminal,
// unchanged otherwise. Flush (flushOutput) writes what an escaper holds.
func outputFor(f *os.File) io.Writer {
	return forTerminal(f, term.IsTerminal(int(f.Fd())))
}

// forTerminal wraps w in an escaper when it is a terminal.
func forTerminal(w io.Writer, terminal bool) io.Writer {
	if !terminal {
		return w
	}
	return &escaper{w: w}
}

// flushOutput writes what w holds back, when it is an escaper.
func flushOutput(w io.Writer) {
	if e, ok := w.(*escaper); ok {
		_ = e.Flush()
	}
}

// unescaped is w as it is under its escaper: a terminal handed to the
// command in the sandbox (exec -t, shell) gets what the command prints
// unescaped, as with docker exec -it or ssh.
func unescaped(w io.Writer) io.Writer {
	if e, ok := w.(*escaper); ok {
		return e.w
	}
	return w
}

// escaper escapes what is written through it. Output arrives in pieces of
// any size (a stream's reads): a character split between two writes is
// held until its end comes, so that it is judged whole, the same however
// the output was cut; what is left held at the end (Flush) is not UTF-8 and
// is shown escaped.
type escaper struct {
	w io.Writer
	// pending is the start of a character the last write ended in.
	pending []byte
}

func (e *escaper) Write(p []byte) (int, error) {
	b := slices.Concat(e.pending, p)
	cut := incompleteTail(b)
	e.pending = b[cut:]
	if _, err := e.w.Write(escapeControls(b[:cut])); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes what is held, escaped.
func (e *escaper) Flush() error {
	if len(e.pending) == 0 {
		return nil
	}
	_, err := e.w.Write(escapeControls(e.pending))
	e.pending = nil
	return err
}

// incompleteTail is where b ends in the first bytes of a UTF-8 character
// whose rest is missing, len(b) when it does not.
func incompleteTail(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax+1; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return i
			}
			break
		}
	}
	return len(b)
}

// bidi are the bidirectional controls (Unicode's Bidi_Control): they
// reorder how a terminal shows the text around them, so that a line reads
// otherwise than it is (CVE-2021-42574).
var bidi = map[rune]bool{
	'\u061c': true, '\u200e': true, '\u200f': true,
	'\u202a': true, '\u202b': true, '\u202c': true, '\u202d': true, '\u202e': true,
	'\u2066': true, '\u2067': true, '\u2068': true, '\u2069': true,
}

// short are the controls with a one-letter escape in Go.
var short = map[rune]string{'\a': `\a`, '\b': `\b`, '\f': `\f`, '\r': `\r`, '\v': `\v`}

// escapeControls spells out what a terminal could act on: C0 controls except
// newline and tab (a carriage return too: alone it lets a line hide what came
// before it), DEL, C1 controls (U+0080 to U+009F, which some terminals obey
// like ESC sequences), the bidirectional controls (bidi), and bytes that are
// not UTF-8 (a terminal in another encoding could read them as C1). Escapes
// are as in a Go string literal: `\r`, `\x1b`, `\u009b` for a C1 character,
// `\u202e` for a bidirectional control, `\xff` for a byte that is not
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
		case r >= 0x80 && r <= 0x9f, bidi[r]:
			out = fmt.Appendf(out, `\u%04x`, r)
		default:
			out = append(out, b[:size]...)
		}
		b = b[size:]
	}
	return out
}
