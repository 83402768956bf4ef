package docker

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"
)

// MaxLogLine bounds a line FollowLogs hands on: a longer one is cut there
// (the rest of it skipped).
const MaxLogLine = 64 << 10

// LogLine is one line of a container's stdout, with the engine's timestamp
// of it (when the engine read it from the container).
type LogLine struct {
	Time time.Time
	Text string
}

// FollowLogs hands each line of the container's stdout (never its stderr),
// from since on (the engine's timestamps; the lines of that very time
// included; zero: from the start), to line, in order, as the engine keeps
// them and then as they come. A line the engine kept in pieces (past
// 16 KiB) comes as one line with the timestamps of its later pieces inside
// it: a piece never starts a line of its own. It returns when the container stops (its log
// ends: nil), when ctx ends, or with line's error.
func (c *Client) FollowLogs(ctx context.Context, id string, since time.Time, line func(LogLine) error) error {
	opts := container.LogsOptions{ShowStdout: true, Follow: true, Timestamps: true}
	if !since.IsZero() {
		opts.Since = fmt.Sprintf("%d.%09d", since.Unix(), since.Nanosecond())
	}
	c.count("container_logs")
	rc, err := c.api.ContainerLogs(ctx, id, opts)
	if err != nil {
		return wrap(err, "logs of "+id)
	}
	defer func() { _ = rc.Close() }()
	pr, pw := io.Pipe()
	go func() {
		_, err := stdcopy.StdCopy(pw, io.Discard, rc)
		_ = pw.CloseWithError(err)
	}()
	defer func() { _ = pr.Close() }()
	r := bufio.NewReaderSize(pr, 4096)
	for {
		text, err := readLine(r)
		if errors.Is(err, io.EOF) {
			return ctx.Err()
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return wrap(err, "logs of "+id)
		}
		stamp, rest, _ := strings.Cut(text, " ")
		at, perr := time.Parse(time.RFC3339Nano, stamp)
		if perr != nil {
			return fmt.Errorf("logs of %s: a line without the engine's timestamp", id)
		}
		if err := line(LogLine{Time: at, Text: rest}); err != nil {
			return err
		}
	}
}

// readLine reads one line without its newline, cut at MaxLogLine bytes;
// io.EOF only when nothing was left (a last line without a newline is a
// line).
func readLine(r *bufio.Reader) (string, error) {
	var b strings.Builder
	for {
		chunk, err := r.ReadSlice('\n')
		if room := MaxLogLine - b.Len(); room > 0 {
			b.Write(chunk[:min(len(chunk), room)])
		}
		switch {
		case err == nil:
			return strings.TrimSuffix(b.String(), "\n"), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && b.Len() > 0:
			return b.String(), nil
		default:
			return "", err
		}
	}
}
