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
	"fmt"
	"hash/fnv"
	"io"
	"sort"
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
// output of the Run). The kernel gives a process's /proc directory its
// effective uid and gid (root's, once it made itself undumpable), and the
// script runs with the Run's group as the sandbox's uid: a directory of
// the group is a process of the Run, one of the uid with another group is
// none (its three groups are one, which it cannot change), and only the
// others' status files are read, a byte at a time (under gVisor each byte
// is a system call of gVisor's kernel). A program that cannot be found
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
(` + rearmCPULimit + `; exec "$@")
rc=$?
exec 2>/dev/null
n=0
while [ "$n" -lt 100 ]; do
  found=0
  for d in /proc/[0-9]*; do
    p="${d#/proc/}"
    [ "$p" = "$$" ] && continue
    if [ -G "$d" ]; then
      kill -9 "$p" 2>/dev/null && found=1
      continue
    fi
    [ -O "$d" ] && continue
    while read -r k a b rest; do
      if [ "$k" = "Gid:" ]; then
        if [ "$a" = "$g" ] || [ "$b" = "$g" ]; then
          kill -9 "$p" 2>/dev/null && found=1
        fi
        break
      fi
    done < "$d/status" 2>/dev/null
  done
  [ "$found" = 0 ] && break
  n=$((n + 1))
done
exit "$rc"`

// rearmCPULimit sets the soft CPU-time limit (RLIMIT_CPU,
// resources.cpuSeconds) to the value it has, in the process that then
// becomes the command. Under the host's kernel, and the current gVisor,
// that changes nothing; Debian's runsc of 2022 held a process to the limit
// only once that process itself called setrlimit, and never its children.
// It is kept for a gVisor of that age an operator may still register: it
// costs one shell builtin.
const rearmCPULimit = `ulimit -S -t "$(ulimit -S -t)" 2>/dev/null`

// RearmCPULimit wraps an exec's command so that the sandbox's CPU-time
// limit holds for it under gVisor too (see rearmCPULimit): a shell sets it,
// then becomes the command.
func RearmCPULimit(command []string) []string {
	return append([]string{"/bin/sh", "-c", rearmCPULimit + `; exec "$@"`, "afe-exec"}, command...)
}

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

// Bounds of a Run's result as it enters the status. A result nested past
// them would reach readers of the Run that cannot read it: the API server's
// watch and list of Runs (its decoder stops at 10,000 levels, counted from
// the list), and clients that decode by recursion.
const (
	// MaxResultDepth bounds the nesting of objects and arrays in a result,
	// its own object counting as the first level.
	MaxResultDepth = 64
	// MaxResultBytes bounds a result re-encoded: its keys and values as
	// they enter the status (a line is at most MaxResultLine bytes, but
	// re-encoding can grow it: U+FFFD for invalid UTF-8).
	MaxResultBytes = MaxResultLine
)

// Result is the JSON object of a stdout line, re-encoded, or why it was
// refused.
type Result struct {
	// Fields are the object's keys, each value re-encoded compactly; nil
	// when refused or when no line held an object.
	Fields map[string]json.RawMessage
	// Refused says why the object was not taken; empty when it was.
	Refused string
}

// Results watches stdout for lines that parse as a JSON object and keeps the
// last one. Lines longer than MaxResultLine are skipped.
type Results struct {
	lines *Lines
	last  Result
}

// Write scans p for complete lines.
func (r *Results) Write(p []byte) (int, error) {
	if r.lines == nil {
		r.lines = &Lines{Max: MaxResultLine, Line: func(line []byte) {
			if res, ok := ParseObject(line); ok {
				r.last = res
			}
		}}
	}
	return r.lines.Write(p)
}

// Last is the last JSON object seen, counting a final line without newline,
// or why it was refused.
func (r *Results) Last() Result {
	if r.lines != nil {
		r.lines.Flush()
	}
	return r.last
}

// ParseObject reads a line holding exactly one JSON object (surrounding
// space allowed); ok is false for any other line. The object is decoded and
// re-encoded, key by key; it is refused, with the reason in Refused, when it
// nests deeper than MaxResultDepth (read token by token, so that no
// decoder sees it nested deeper than that), holds a
// number no float64 can hold, or comes to more than MaxResultBytes.
func ParseObject(line []byte) (Result, bool) {
	line = bytes.TrimSpace(line)
	if len(line) < 2 || line[0] != '{' {
		return Result{}, false
	}
	depth, ok := objectDepth(line)
	if !ok {
		return Result{}, false
	}
	if depth > MaxResultDepth {
		return Result{Refused: fmt.Sprintf("it nests %d levels deep, more than %d", depth, MaxResultDepth)}, true
	}
	var obj map[string]any
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if err := dec.Decode(&obj); err != nil || obj == nil {
		return Result{}, false
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys) // the same reason for the same line, whatever the map's order
	fields := make(map[string]json.RawMessage, len(obj))
	size := len("{}") + max(len(keys)-1, 0) // braces and commas
	for _, k := range keys {
		if n, ok := outOfRange(obj[k]); ok {
			return Result{Refused: fmt.Sprintf("its number %.40s is out of range", n)}, true
		}
		key, err := encode(k)
		if err != nil {
			return Result{}, false
		}
		val, err := encode(obj[k])
		if err != nil {
			return Result{}, false
		}
		fields[k] = val
		size += len(key) + len(":") + len(val)
	}
	if size > MaxResultBytes {
		return Result{Refused: fmt.Sprintf("it comes to %d bytes re-encoded, more than %d", size, MaxResultBytes)}, true
	}
	return Result{Fields: fields}, true
}

// objectDepth reads a line holding exactly one JSON object token by token
// (no recursion, whatever its nesting) and tells how deep it nests objects
// and arrays; ok is false for any other line.
func objectDepth(line []byte) (deepest int, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber() // a number past float64 is read, and refused later
	depth := 0
	for {
		t, err := dec.Token()
		if err != nil {
			return 0, false
		}
		switch t {
		case json.Delim('{'), json.Delim('['):
			depth++
			deepest = max(deepest, depth)
		case json.Delim('}'), json.Delim(']'):
			depth--
		default:
			if depth == 0 {
				return 0, false // a scalar, not an object
			}
		}
		if depth == 0 {
			break
		}
	}
	if _, err := dec.Token(); err != io.EOF {
		return 0, false // more after the object
	}
	return deepest, true
}

// outOfRange finds a number in v that no float64 holds (1e400): the API
// server would refuse the status that carries it.
func outOfRange(v any) (string, bool) {
	switch v := v.(type) {
	case json.Number:
		if _, err := strconv.ParseFloat(string(v), 64); err != nil {
			return string(v), true
		}
	case []any:
		for _, e := range v {
			if n, ok := outOfRange(e); ok {
				return n, true
			}
		}
	case map[string]any:
		for _, e := range v {
			if n, ok := outOfRange(e); ok {
				return n, true
			}
		}
	}
	return "", false
}

// encode is v as compact JSON, with <, > and & as they are.
func encode(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
