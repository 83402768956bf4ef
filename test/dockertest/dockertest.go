// Package dockertest holds helpers for tests that use the real Docker engine:
// requiring it (a failure under CI, a skip otherwise), inspecting objects
// with the docker CLI as an independent witness, and cleaning up by label.
package dockertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/test/testenv"
)

// NoDockerEnv is the variable that, set, has the tests that need the
// engine skip (unless Docker is required: CI, make test), as `make
// test-fast` sets it: the fast tier stays fast where an engine runs.
const NoDockerEnv = "AFE_NO_DOCKER"

// TestImage is the small sandbox image `make images` builds.
const TestImage = "afe/busybox:dev"

// Require returns a client of the local engine, or a reason to skip. A slow
// engine is waited for (testenv.PingPatience). Under CI and `make test`
// (testenv.DockerRequired) a missing engine or test image is an error,
// never a skip.
func Require() (*docker.Client, string, error) {
	if os.Getenv(NoDockerEnv) != "" && !testenv.DockerRequired() {
		return nil, "the fast tier (" + NoDockerEnv + ", make test-fast) runs no test of the engine", nil
	}
	c, err := docker.New("")
	if err == nil {
		err = testenv.WaitForEngine(c.Ping)
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err = c.EnsureImage(ctx, TestImage)
			if err != nil {
				err = fmt.Errorf("%w (run `make images`)", err)
			}
		}
	}
	if err == nil {
		return c, "", nil
	}
	if testenv.DockerRequired() {
		return nil, "", fmt.Errorf("the Docker engine is required here (CI or make test) and is not usable: %w", err)
	}
	return nil, fmt.Sprintf("Docker is not usable: %v", err), nil
}

// Inspected is what the tests check of a container, read with `docker inspect`.
type Inspected struct {
	ID     string
	Name   string
	Config struct {
		User       string
		Env        []string
		Cmd        []string
		Labels     map[string]string
		WorkingDir string
		OpenStdin  bool
	}
	State struct {
		Running bool
		// Pid is the host process ID of the container's first process.
		Pid       int
		StartedAt string
	}
	HostConfig struct {
		// Runtime is the container's OCI runtime (runc, runsc).
		Runtime        string
		NetworkMode    string
		CapDrop        []string
		CapAdd         []string
		SecurityOpt    []string
		Privileged     bool
		Memory         int64
		MemorySwap     int64
		NanoCpus       int64
		PidsLimit      *int64
		Init           *bool
		Binds          []string
		ReadonlyRootfs bool
		Tmpfs          map[string]string
		Dns            []string //nolint:revive // the engine's spelling
		ExtraHosts     []string
		LogConfig      struct {
			Type   string
			Config map[string]string
		}
	}
	Mounts []struct {
		Type        string
		Name        string
		Source      string
		Destination string
	}
	NetworkSettings struct {
		Networks map[string]struct{ IPAddress string }
	}
}

// Inspect inspects a container with the docker CLI.
func Inspect(name string) (*Inspected, error) {
	out, err := exec.Command("docker", "inspect", "--type", "container", name).Output()
	if err != nil {
		return nil, fmt.Errorf("docker inspect %s: %w", name, err)
	}
	var list []Inspected
	if err := json.Unmarshal(out, &list); err != nil || len(list) != 1 {
		return nil, fmt.Errorf("docker inspect %s: %w", name, err)
	}
	list[0].Name = strings.TrimPrefix(list[0].Name, "/")
	return &list[0], nil
}

// Objects lists the names of containers, volumes and networks carrying the
// labels ("key=value", several separated by commas), as "container/NAME",
// "volume/NAME", "network/NAME".
func Objects(labels string) ([]string, error) {
	var filters []string
	for _, l := range strings.Split(labels, ",") {
		filters = append(filters, "--filter", "label="+l)
	}
	var out []string
	for _, kind := range []struct{ cmd, format string }{
		{"container ls -a", "{{.Names}}"}, {"volume ls", "{{.Name}}"}, {"network ls", "{{.Name}}"},
	} {
		args := append(append(strings.Fields(kind.cmd), filters...), "--format", kind.format)
		b, err := exec.Command("docker", args...).Output()
		if err != nil {
			// A listing that failed is no evidence that nothing is left.
			return nil, fmt.Errorf("docker %s: %w: %s", strings.Join(args, " "), err, stderrOf(err))
		}
		for _, n := range strings.Fields(string(b)) {
			out = append(out, strings.Fields(kind.cmd)[0]+"/"+n)
		}
	}
	return out, nil
}

func stderrOf(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return strings.TrimSpace(string(ee.Stderr))
	}
	return ""
}

// RemoveAll removes every container, volume and network carrying the
// label; for an instance's label (afe.controller=NAME), also its conntrack
// bound's table on the host, which its manager leaves when it stops
// (internal/connlimit), lest a later network on a subnet it held be
// bounded by a table nobody keeps.
func RemoveAll(label string) {
	if instance, ok := strings.CutPrefix(label, "afe.controller="); ok && instance != "" {
		// connlimit.Table's name (connlimit's tests use this package).
		_ = exec.Command("nft", "delete", "table", "ip", "afe-"+instance).Run()
	}
	objects, _ := Objects(label)
	for _, o := range objects {
		if kind, name, _ := strings.Cut(o, "/"); kind == "container" {
			_ = exec.Command("docker", "rm", "-f", name).Run()
		}
	}
	objects, _ = Objects(label)
	for _, o := range objects {
		kind, name, _ := strings.Cut(o, "/")
		switch kind {
		case "volume":
			_ = exec.Command("docker", "volume", "rm", "-f", name).Run()
		case "network":
			_ = exec.Command("docker", "network", "rm", name).Run()
		}
	}
}

// Exec runs a command in a container with the docker CLI.
func Exec(container string, args ...string) (string, error) {
	out, err := exec.Command("docker", append([]string{"exec", container}, args...)...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// RemoveContainer removes a container behind the controller's back.
func RemoveContainer(name string) error {
	out, err := exec.Command("docker", "rm", "-f", name).CombinedOutput()
	if err != nil {
		return fmt.Errorf("docker rm -f %s: %w: %s", name, err, out)
	}
	return nil
}

// NetworkInternal is true when the network is internal.
func NetworkInternal(name string) bool {
	out, err := exec.Command("docker", "network", "inspect", "-f", "{{.Internal}}", name).Output()
	return err == nil && strings.TrimSpace(string(out)) == "true"
}

// ContainerIP is the container's address on the network.
func ContainerIP(container, network string) string {
	out, _ := exec.Command("docker", "inspect", "-f", `{{ (index .NetworkSettings.Networks "`+network+`").IPAddress }}`, container).Output()
	return strings.TrimSpace(string(out))
}

// HostAddresses are the host's addresses on every Docker network (their
// gateways): where a service on all host interfaces would answer.
func HostAddresses() []string {
	out, _ := exec.Command("sh", "-c", `docker network inspect $(docker network ls -q) -f '{{range .IPAM.Config}}{{.Gateway}} {{end}}'`).Output()
	return strings.Fields(string(out))
}
