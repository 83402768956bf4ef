// Package runexec holds the pure parts of executing a Run: the output tail,
// the JSON result, the process tag and the kill script.
//
// Every process of a Run carries a tag it cannot remove: its group ID. The
// command is executed as the sandbox's uid with a group ID derived from the
// Run (and attempt); without capabilities and with no-new-privileges, neither
// the command nor anything it starts (background children, daemons that
// setsid, processes that clear their environment) can change its group. At
// the deadline, or when a Run must be stopped, every process with that group
// is killed, repeatedly until none is left. The kill script uses only shell
// builtins, so any image with /bin/sh works.
package runexec

import (
	"bytes"
	"encoding/json"
	"hash/fnv"
	"strconv"
	"sync"
)

// KillScript kills, as the sandbox's user, every process whose real or
// effective group is $1, until none is left; it exits 1 if some survive 100
// rounds. Only shell builtins are used.
const KillScript = `g="$1"; n=0
while [ "$n" -lt 100 ]; do
  found=0
  for s in /proc/[0-9]*/status; do
    while read -r k a b rest; do
      if [ "$k" = "Gid:" ]; then
        if [ "$a" = "$g" ] || [ "$b" = "$g" ]; then
          p="${s#/proc/}"; p="${p%/status}"
          kill -9 "$p" 2>/dev/null && found=1
        fi
        break
      fi
    done < "$s" 2>/dev/null
  done
  [ "$found" = 0 ] && exit 0
  n=$((n + 1))
done
exit 1`

// StepScript runs a step's command ("$@" after the group $1) and then,
// before the exec ends, kills what the command left of the group, as
// KillScript would, but in the same exec (one engine round trip less) and
// sparing itself: a background process that kept the output open dies with
// the command, so the Run ends with it. The command is the program the
// engine would have executed (found on PATH, never a shell builtin), in a
// child; the script exits with its code, and writes nothing of its own
// once the command has ended (processes vanishing under the scan are no
// output of the Run). A program that cannot be found
// or executed is reported on stderr after ExecFailedPrefix, exit code 127,
// as the engine would have refused it.
const StepScript = `g="$1"; shift
case "$1" in
*/*) [ -f "$1" ] && [ -x "$1" ] ;;
*) found=""; rest="$PATH:"
   while [ -n "$rest" ]; do
     d="${rest%%:*}"; rest="${rest#*:}"
     [ -n "$d" ] || d=.
     if [ -f "$d/$1" ] && [ -x "$d/$1" ]; then found=1; break; fi
   done
   [ -n "$found" ] ;;
esac || { printf '` + ExecFailedPrefix + `%s: no such executable file in $PATH\n' "$1" >&2; exit 127; }
(exec "$@")
rc=$?
exec 2>/dev/null
n=0
while [ "$n" -lt 100 ]; do
  found=0
  for s in /proc/[0-9]*/status; do
    p="${s#/proc/}"; p="${p%/status}"
    [ "$p" = "$$" ] && continue
    while read -r k a b rest; do
      if [ "$k" = "Gid:" ]; then
        if [ "$a" = "$g" ] || [ "$b" = "$g" ]; then
          kill -9 "$p" 2>/dev/null && found=1
        fi
        break
      fi
    done < "$s" 2>/dev/null
  done
  [ "$found" = 0 ] && break
  n=$((n + 1))
done
exit "$rc"`

// ExecFailedPrefix starts StepScript's message for a program it cannot
// execute.
const ExecFailedPrefix = "afe-run: exec: "

// StepCommand is the exec command of one step of an attempt whose group is
// gid: the command, then the kill of what it left.
func StepCommand(gid int, command []string) []string {
	return append([]string{"/bin/sh", "-c", StepScript, "afe-run", strconv.Itoa(gid)}, command...)
}

// KillCommand is the exec command that kills a Run's processes.
func KillCommand(gid int) []string {
	return []string{"/bin/sh", "-c", KillScript, "afe-kill", strconv.Itoa(gid)}
}

// gidBase and gidSpan place Run groups far above any group an image uses.
const (
	gidBase = 2_000_000_000
	gidSpan = 100_000_000
)

// GIDMin and GIDMax bound the groups GID returns: they are the controller's
// own process tags, so a sandbox's user may not take one, and none may be a
// privileged group of the engine's host.
const (
	GIDMin = gidBase
	GIDMax = gidBase + gidSpan - 1
)

// GID is the group of one attempt of a Run.
func GID(runUID string, attempt int32) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(runUID + "/" + strconv.Itoa(int(attempt))))
	return gidBase + int(h.Sum32()%gidSpan)
}

// Command is what to execute: the command as is, or the script with sh -c.
func Command(command []string, script string) []string {
	if len(command) > 0 {
		return command
	}
	return []string{"/bin/sh", "-c", script}
}

// Tail keeps the last Limit bytes written to it; it is safe for concurrent
// writers, so stdout and stderr can share it and stay interleaved.
type Tail struct {
	Limit     int
	mu        sync.Mutex
	buf       []byte
	truncated bool
}

// Write keeps the end of p.
func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.Limit; over > 0 {
		t.truncated = true
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// String is what was kept, as valid UTF-8 (a rune cut at the start is
// dropped).
func (t *Tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.buf
	if t.truncated {
		for len(b) > 0 && b[0]&0xC0 == 0x80 {
			b = b[1:]
		}
	}
	return string(bytes.ToValidUTF8(b, []byte("\uFFFD")))
}

// Truncated is true when the beginning was dropped.
func (t *Tail) Truncated() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.truncated
}

// MaxResultLine bounds the stdout line a result is read from.
const MaxResultLine = 64 << 10

// Lines splits what is written to it into lines and hands each complete
// line, without its newline, to Line. A line longer than Max bytes is
// dropped whole. Flush hands over a last line that has no newline.
type Lines struct {
	Max     int
	Line    func([]byte)
	buf     []byte
	skip    bool
	pending bool
}

// Write scans p for complete lines.
func (l *Lines) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if !l.skip {
			if len(l.buf)+len(chunk) > l.Max {
				l.skip, l.buf = true, l.buf[:0]
			} else {
				l.buf = append(l.buf, chunk...)
			}
		}
		l.pending = true
		if i < 0 {
			break
		}
		l.end()
		p = p[i+1:]
	}
	return n, nil
}

// Flush ends a last line without newline.
func (l *Lines) Flush() {
	if l.pending {
		l.end()
	}
}

func (l *Lines) end() {
	if !l.skip {
		l.Line(l.buf)
	}
	l.buf, l.skip, l.pending = l.buf[:0], false, false
}

// Results watches stdout for lines that parse as a JSON object and keeps the
// last one. Lines longer than MaxResultLine are skipped.
type Results struct {
	lines *Lines
	last  map[string]json.RawMessage
}

// Write scans p for complete lines.
func (r *Results) Write(p []byte) (int, error) {
	if r.lines == nil {
		r.lines = &Lines{Max: MaxResultLine, Line: func(line []byte) {
			if obj, ok := ParseObject(line); ok {
				r.last = obj
			}
		}}
	}
	return r.lines.Write(p)
}

// Last is the last JSON object seen, counting a final line without newline.
func (r *Results) Last() map[string]json.RawMessage {
	if r.lines != nil {
		r.lines.Flush()
	}
	return r.last
}

// ParseObject parses a line holding exactly one JSON object (surrounding
// space allowed).
func ParseObject(line []byte) (map[string]json.RawMessage, bool) {
	line = bytes.TrimSpace(line)
	if len(line) < 2 || line[0] != '{' {
		return nil, false
	}
	var obj map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(line))
	if err := dec.Decode(&obj); err != nil || obj == nil {
		return nil, false
	}
	if dec.More() {
		return nil, false
	}
	return obj, true
}
