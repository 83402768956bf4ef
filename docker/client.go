package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"
)

// Client is the Engine of a real Docker engine.
type Client struct {
	api *client.Client
	// cgroups reads container usage from the host's cgroup files, for a
	// local engine (nil otherwise).
	cgroups *hostCgroups
	// data is the engine's data directory, walked to measure disk usage
	// where this process sees it.
	data hostData
	// own holds the IDs of the execs this client created, so that the
	// execs seen in the event stream can be told from those made on the
	// engine by anyone else.
	own sync.Map

	// rt is the engine's list of runtimes as last asked, at rtTime.
	rtMu   sync.Mutex
	rt     map[string]Runtime
	rtTime time.Time
}

var _ Engine = (*Client)(nil)

// New connects to the engine at host ("unix:///var/run/docker.sock",
// "tcp://..."), or, when host is empty, to DOCKER_HOST or the local socket.
// TLS settings come from DOCKER_CERT_PATH and DOCKER_TLS_VERIFY. The API
// version is negotiated with the engine, so engines from 20.10 on work.
func New(host string) (*Client, error) {
	opts := []client.Opt{client.FromEnv, client.WithAPIVersionNegotiation()}
	if host != "" {
		opts = append(opts, client.WithHost(host))
	}
	api, err := client.NewClientWithOpts(opts...)
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	c := &Client{api: api}
	c.cgroups = localCgroups(c.IsLocal())
	return c, nil
}

// Host is the address of the engine.
func (c *Client) Host() string { return c.api.DaemonHost() }

// IsLocal is true when the engine is reached through a local socket.
func (c *Client) IsLocal() bool {
	h := c.api.DaemonHost()
	return len(h) > 7 && h[:7] == "unix://"
}

// Close releases the client's connections.
func (c *Client) Close() error { return c.api.Close() }

// Ping checks that the engine answers.
func (c *Client) Ping(ctx context.Context) error {
	c.count("ping")
	if _, err := c.api.Ping(ctx); err != nil {
		return wrap(err, "ping")
	}
	return nil
}

// wrap turns SDK errors into this package's sentinel errors.
func wrap(err error, what string) error {
	switch {
	case err == nil:
		return nil
	case cerrdefs.IsNotFound(err):
		return fmt.Errorf("%s: %w: %w", what, ErrNotFound, err)
	case cerrdefs.IsConflict(err):
		return fmt.Errorf("%s: %w: %w", what, ErrConflict, err)
	case client.IsErrConnectionFailed(err), isNetError(err):
		return fmt.Errorf("%s: %w: %w", what, ErrUnavailable, err)
	default:
		return fmt.Errorf("%s: %w", what, err)
	}
}

// isNetError is true for a refused or broken connection to the engine.
func isNetError(err error) bool {
	var opErr *net.OpError
	return errors.As(err, &opErr) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// labelFilter selects the objects that carry all the labels.
func labelFilter(labels map[string]string) filters.Args {
	args := filters.NewArgs()
	for k, v := range labels {
		args.Add("label", k+"="+v)
	}
	return args
}
