package egressnet

import (
	"context"
	"errors"
	"fmt"
	"time"

	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/sandboxspec"
)

// ProxyProbeTimeout bounds the wait for a started proxy to answer.
const ProxyProbeTimeout = 15 * time.Second

// ProxyProber probes a proxy from inside its container.
type ProxyProber interface {
	Exec(ctx context.Context, container string, spec docker.ExecSpec) (int, error)
	InspectContainer(ctx context.Context, name string) (*docker.Container, error)
}

// WaitProxy probes the proxy from inside its container until squid answers,
// for at most ProxyProbeTimeout; it fails at once when the proxy exited, and
// with docker.ErrUnavailable when the engine does not answer.
func WaitProxy(ctx context.Context, engine ProxyProber, proxy *docker.Container) error {
	ctx, cancel := context.WithTimeout(ctx, ProxyProbeTimeout)
	defer cancel()
	delay := 50 * time.Millisecond
	for {
		code, err := engine.Exec(ctx, proxy.ID, docker.ExecSpec{Cmd: []string{sandboxspec.ProxyProbe}})
		if err == nil && code == 0 {
			return nil
		}
		if errors.Is(err, docker.ErrUnavailable) {
			return err
		}
		if c, ierr := engine.InspectContainer(ctx, proxy.ID); ierr == nil && !c.Running {
			return fmt.Errorf("it exited with code %d; see `docker logs %s`", c.ExitCode, proxy.Name)
		}
		select {
		case <-ctx.Done():
			return errors.New("no answer within " + ProxyProbeTimeout.String())
		case <-time.After(delay):
		}
		// squid answers within about a second of its start here: a
		// probe every 100 ms finds it a moment after it does.
		delay = min(2*delay, 100*time.Millisecond)
	}
}
