package builtin

import (
	"bytes"
	"fmt"
	"sync"
)

// lines cuts what a channel carries into lines, within bounds. The first
// line past a bound, or refused by parse, makes the stream invalid; from then
// on what comes is dropped unread, so the writer is never blocked and nothing
// more is kept. The verdict does not depend on how the bytes are cut.
type lines struct {
	maxBytes, maxLines, maxLine int
	// parse takes one complete line and returns why it is refused, or "".
	parse func(line string) string
	buf   []byte
	bytes int
	n     int
	// invalid is why the stream cannot be trusted; "" while it can.
	invalid string
}

func (l *lines) write(p []byte) {
	for len(p) > 0 && l.invalid == "" {
		if l.bytes >= l.maxBytes {
			l.invalid = fmt.Sprintf("it is longer than %d bytes", l.maxBytes)
			return
		}
		chunk := p[:min(len(p), l.maxBytes-l.bytes)]
		i := bytes.IndexByte(chunk, '\n')
		part := chunk
		if i >= 0 {
			part = chunk[:i]
		}
		if len(l.buf)+len(part) > l.maxLine {
			l.invalid = fmt.Sprintf("line %d is longer than %d bytes", l.n+1, l.maxLine)
			return
		}
		l.buf = append(l.buf, part...)
		if i < 0 {
			l.bytes += len(chunk)
			p = p[len(chunk):]
			continue
		}
		l.bytes += i + 1
		p = p[i+1:]
		l.n++
		if l.n > l.maxLines {
			l.invalid = fmt.Sprintf("it has more than %d lines", l.maxLines)
			return
		}
		if why := l.parse(string(l.buf)); why != "" {
			l.invalid = fmt.Sprintf("line %d %s", l.n, why)
		}
		l.buf = l.buf[:0]
	}
}

// lockedLines is a stream of lines fed from one goroutine (the output as
// it comes) and read from another; what embeds it is an io.Writer. mu
// also guards what the stream's parse writes.
type lockedLines struct {
	mu     sync.Mutex
	stream lines
}

// Write parses complete lines; it never fails, so the output is drained
// whatever it holds.
func (l *lockedLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stream.write(p)
	return len(p), nil
}

// Invalid says why the output cannot be trusted: the first bound it went
// past or the first line the script does not write. It is "" for output
// that can be.
func (l *lockedLines) Invalid() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stream.invalid
}
