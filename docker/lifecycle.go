package docker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/docker/docker/api/types/container"
)

// StopGrace is how long a stopped container's processes get between the
// SIGTERM and the SIGKILL.
const StopGrace = 5 * time.Second

// StopContainer stops a running container (SIGTERM, then SIGKILL after
// StopGrace) and leaves it, with its writable layer, in place; it succeeds
// when the container is already stopped, and returns ErrNotFound when there
// is none of the name.
func (c *Client) StopContainer(ctx context.Context, name string) error {
	c.count("container_stop")
	grace := int(StopGrace / time.Second)
	if err := c.api.ContainerStop(ctx, name, container.StopOptions{Timeout: &grace}); err != nil {
		return wrap(err, "stop container "+name)
	}
	return nil
}

// StartContainer starts a stopped container again, as it was created; it
// succeeds when the container already runs. A container the engine cannot
// start fails with ErrStartFailed (and is left as it is).
func (c *Client) StartContainer(ctx context.Context, name string) error {
	c.count("container_start")
	if err := c.api.ContainerStart(ctx, name, container.StartOptions{}); err != nil {
		err = wrap(err, "start container "+name)
		if errors.Is(err, ErrNotFound) || errors.Is(err, ErrUnavailable) {
			return err
		}
		return fmt.Errorf("%w: %w", ErrStartFailed, err)
	}
	return nil
}

// RunningExecs counts the commands executed in the container (docker exec,
// a Run's attempt) that are still running, from the engine's own record; a
// container that does not run has none.
func (c *Client) RunningExecs(ctx context.Context, name string) (int, error) {
	c.count("container_inspect")
	info, err := c.api.ContainerInspect(ctx, name)
	if err != nil {
		return 0, wrap(err, "inspect container "+name)
	}
	if info.State == nil || !info.State.Running {
		return 0, nil
	}
	n := 0
	for _, id := range info.ExecIDs {
		c.count("container_exec_inspect")
		e, err := c.api.ContainerExecInspect(ctx, id)
		if isNotFound(err) {
			continue // ended and forgotten meanwhile
		}
		if err != nil {
			return 0, wrap(err, "inspect exec in "+name)
		}
		if e.Running {
			n++
		}
	}
	return n, nil
}
