// Package testenv holds the rules every test suite follows about the Docker
// engine and the test control plane it needs. It imports nothing of the
// project, so that every test package, the docker package's own included,
// can use it.
package testenv

import (
	"context"
	"fmt"
	"os"
	"time"
)

// PingPatience is how long a suite waits for a slow engine to answer
// before it calls the engine missing.
const PingPatience = 30 * time.Second

// DockerRequired is true when a missing engine must fail the tests rather
// than skip them: under CI (CI set) and under `make test`, which sets
// AFE_REQUIRE_DOCKER. A plain `go test` on a machine without Docker skips.
func DockerRequired() bool {
	return os.Getenv("CI") != "" || os.Getenv("AFE_REQUIRE_DOCKER") != ""
}

// WaitForEngine pings until the engine answers or PingPatience has passed;
// each ping gets a few seconds of its own.
func WaitForEngine(ping func(context.Context) error) error {
	return waitFor(ping, PingPatience, time.Second)
}

func waitFor(ping func(context.Context) error, patience, pause time.Duration) error {
	deadline := time.Now().Add(patience)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := ping(ctx)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().Add(pause).After(deadline) {
			return fmt.Errorf("the Docker engine did not answer within %s: %w", patience, err)
		}
		time.Sleep(pause)
	}
}
