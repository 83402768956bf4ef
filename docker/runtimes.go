package docker

import (
	"context"
	"fmt"
	"time"
)

// runtimesTTL is how long the engine's list of runtimes is kept; a name
// not on the kept list is looked up again once it is runtimesRecheck old,
// so that a runtime registered with SIGHUP is seen soon.
const (
	runtimesTTL     = time.Minute
	runtimesRecheck = time.Second
)

// Runtimes lists the OCI runtimes the engine has, by name.
func (c *Client) Runtimes(ctx context.Context) (map[string]Runtime, error) {
	return c.runtimes(ctx, "")
}

// runtimes returns the kept list when it is fresh and names want (any name
// when want is empty), and asks the engine otherwise.
func (c *Client) runtimes(ctx context.Context, want string) (map[string]Runtime, error) {
	c.rtMu.Lock()
	defer c.rtMu.Unlock()
	age := time.Since(c.rtTime)
	if c.rt != nil && age < runtimesTTL {
		if _, ok := c.rt[want]; ok || want == "" || age < runtimesRecheck {
			return c.rt, nil
		}
	}
	c.count("info")
	info, err := c.api.Info(ctx)
	if err != nil {
		return nil, wrap(err, "engine info")
	}
	out := make(map[string]Runtime, len(info.Runtimes))
	for name, r := range info.Runtimes {
		out[name] = Runtime{Name: name, Path: r.Path, Args: r.Args, Type: r.Type}
	}
	c.rt, c.rtTime = out, time.Now()
	return out, nil
}

// Runtime returns the engine's runtime of that name; ErrNotFound when the
// engine has none.
func (c *Client) Runtime(ctx context.Context, name string) (Runtime, error) {
	all, err := c.runtimes(ctx, name)
	if err != nil {
		return Runtime{}, err
	}
	r, ok := all[name]
	if !ok {
		return Runtime{}, fmt.Errorf("the engine has no runtime %q: %w", name, ErrNotFound)
	}
	return r, nil
}
