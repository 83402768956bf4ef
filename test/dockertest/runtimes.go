package dockertest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"afe.dev/sandbox/docker"
)

// Runtimes are the OCI runtimes the boundary specs run under, each one:
// AFE_TEST_RUNTIMES (comma-separated; `make test` sets "runc,runsc"), or
// runc alone.
func Runtimes() []string {
	var out []string
	for _, name := range strings.Split(os.Getenv("AFE_TEST_RUNTIMES"), ",") {
		if name = strings.TrimSpace(name); name != "" {
			out = append(out, name)
		}
	}
	if len(out) == 0 {
		out = []string{"runc"}
	}
	return out
}

// RequireRuntimes checks that the engine has every runtime of Runtimes: a
// runtime the tests are asked to run under and the engine lacks is an
// error, never a skip (make runsc registers runsc).
func RequireRuntimes(c *docker.Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, name := range Runtimes() {
		if _, err := c.Runtime(ctx, name); err != nil {
			return fmt.Errorf("AFE_TEST_RUNTIMES names runtime %q, which the engine lacks (run `make runsc`): %w", name, err)
		}
	}
	return nil
}

// UserSpaceKernel tells whether the engine's runtime of that name is a
// user-space kernel (gVisor).
func UserSpaceKernel(c *docker.Client, name string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rt, err := c.Runtime(ctx, name)
	return err == nil && rt.UserSpaceKernel()
}
