package docker

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"
)

// ErrNoAnswer is returned by Tell when the container's stderr ended, or the
// wait did, before the answer came.
var ErrNoAnswer = errors.New("the container did not answer")

// answerLineMax bounds a line of the container's stderr that Tell reads:
// a longer one is cut there (its rest read as another line), so that a
// process of the container cannot make the caller hold more.
const answerLineMax = 4096

// Tell writes line, and a newline, to the stdin of a running container made
// with OpenStdin (and not StdinOnce: the engine keeps that stdin open after
// the attach ends), then reads the container's stderr from that moment on
// and returns the first line for which answered is true. Only a client of
// the engine's API can write to a container's stdin: a process of another
// container has no way to it. Tell waits for the answer until ctx ends (the
// container's output may never end). ErrNoAnswer when the stderr ended
// first.
func (c *Client) Tell(ctx context.Context, containerID, line string, answered func(string) bool) (string, error) {
	if strings.ContainsRune(line, '\n') {
		return "", fmt.Errorf("tell %s: the line holds a newline", containerID)
	}
	c.count("container_attach")
	attach, err := c.api.ContainerAttach(ctx, containerID, container.AttachOptions{Stream: true, Stdin: true, Stderr: true})
	if err != nil {
		return "", wrap(err, "attach to "+containerID)
	}
	// Closing the connection ends the attach, never the container's
	// stdin, and stops the reads below.
	defer attach.Close()
	stderr, write := io.Pipe()
	// Closing the reader ends a copy blocked on output that follows the
	// answer (squid logs its reconfiguration right after it).
	defer func() { _ = stderr.Close() }()
	go func() {
		_, err := stdcopy.StdCopy(io.Discard, write, attach.Reader)
		write.CloseWithError(err)
	}()
	found := make(chan string, 1)
	go func() {
		defer close(found)
		lines := bufio.NewReaderSize(stderr, answerLineMax)
		for {
			got, err := lines.ReadSlice('\n')
			if answer := strings.TrimRight(string(got), "\n"); len(got) > 0 && answered(answer) {
				found <- answer
				return
			}
			if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
				return
			}
		}
	}()
	if _, err := io.WriteString(attach.Conn, line+"\n"); err != nil {
		return "", fmt.Errorf("tell %s: %w", containerID, err)
	}
	select {
	case <-ctx.Done():
		return "", fmt.Errorf("tell %s: %w: %w", containerID, ErrNoAnswer, ctx.Err())
	case answer, ok := <-found:
		if !ok {
			return "", fmt.Errorf("tell %s: %w: its output ended", containerID, ErrNoAnswer)
		}
		return answer, nil
	}
}
