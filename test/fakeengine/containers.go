package fakeengine

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"afe.dev/sandbox/docker"
)

// Container states, as the engine names them.
const (
	stateCreated = "created"
	stateRunning = "running"
	stateExited  = "exited"
)

type attachment struct {
	network string // its name, kept when the network goes
	ip      string
}

type container struct {
	id        string
	spec      docker.ContainerSpec
	state     string
	exitCode  int
	startedAt time.Time
	created   time.Time
	pid       int
	// ips are the container's attachments by network ID.
	ips map[string]attachment
	// processes are the ones a test added besides the first.
	processes []docker.Process
	// usage and layerBytes are what SetUsage gave it.
	usage      docker.ContainerUsage
	layerBytes int64
	// execs counts the Execs in flight.
	execs int
}

func (c *container) running() bool { return c.state == stateRunning }

// report is the container as InspectContainer reports it.
func (c *container) report(volumes map[string]*volume) *docker.Container {
	out := &docker.Container{
		ID: c.id, Name: c.spec.Name, Image: c.spec.Image, Labels: copyLabels(c.spec.Labels),
		State: c.state, Running: c.running(), ExitCode: c.exitCode, StartedAt: c.startedAt, Created: c.created,
		IPs: map[string]string{}, User: c.spec.User, Runtime: c.spec.Runtime,
	}
	if c.running() {
		out.Pid = c.pid
	}
	for _, a := range c.ips {
		ip := ""
		if c.running() {
			ip = a.ip
		}
		out.IPs[a.network] = ip
	}
	for _, m := range c.spec.Mounts {
		mp := docker.MountPoint{Type: m.Type, Source: m.Source, Destination: m.Target}
		if v, ok := volumes[m.Source]; ok && m.Type == docker.MountVolume {
			mp.Source = v.mountpoint()
		}
		out.Mounts = append(out.Mounts, mp)
	}
	return out
}

// container finds a container by name, full ID or unique ID prefix, as the
// engine does. The caller holds e.mu.
func (e *Engine) container(name string) *container {
	name = strings.TrimPrefix(name, "/")
	if c, ok := e.containers[name]; ok {
		return c
	}
	var prefixed []*container
	for _, c := range e.containers {
		if c.spec.Name == name {
			return c
		}
		if strings.HasPrefix(c.id, name) {
			prefixed = append(prefixed, c)
		}
	}
	if len(prefixed) == 1 {
		return prefixed[0]
	}
	return nil
}

// targets are the names a fault on a call about c may name it by.
func targets(arg string, c *container) []string {
	if c == nil {
		return []string{arg}
	}
	return []string{arg, c.spec.Name, c.id}
}

// RunContainer creates and starts the container. A container of that name
// with the spec's labels is returned as it is (and started if stopped);
// with other labels the call fails with docker.ErrConflict. A container
// that cannot be started is removed again.
func (e *Engine) RunContainer(_ context.Context, spec docker.ContainerSpec) (*docker.Container, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.check(OpRunContainer, targets(spec.Name, e.container(spec.Name))...); err != nil {
		return nil, err
	}
	if existing := e.byName(spec.Name); existing != nil {
		if !labelsMatch(existing.spec.Labels, spec.Labels) {
			return nil, fmt.Errorf("container %s: %w", spec.Name, docker.ErrConflict)
		}
		if !existing.running() {
			if err := e.start(existing); err != nil {
				return nil, fmt.Errorf("start container %s: %w", spec.Name, err)
			}
		}
		return existing.report(e.volumes), nil
	}
	if rt := spec.Runtime; rt != "" && rt != "runc" && !e.runtimes[rt] {
		return nil, fmt.Errorf("create container %s: unknown runtime specified %s", spec.Name, rt)
	}
	c, err := e.create(spec)
	if err != nil {
		return nil, err
	}
	for _, name := range spec.ExtraNetworks {
		n := e.network(name)
		if n == nil {
			e.destroy(c)
			return nil, fmt.Errorf("connect container %s to network %s: %w: network %s not found", spec.Name, name, docker.ErrNotFound, name)
		}
		c.ips[n.id] = attachment{network: n.name, ip: n.address()}
	}
	if err := e.start(c); err != nil {
		e.destroy(c)
		return nil, fmt.Errorf("start container %s: %w", spec.Name, err)
	}
	return c.report(e.volumes), nil
}

// byName finds a container by its exact name. The caller holds e.mu.
func (e *Engine) byName(name string) *container {
	for _, c := range e.containers {
		if c.spec.Name == name {
			return c
		}
	}
	return nil
}

// create makes a container, as ContainerCreate: of a present image, on an
// existing network, with the volumes it mounts (made, with the mount's
// labels, when missing) and the host folders it binds (which must exist).
// The caller holds e.mu.
func (e *Engine) create(spec docker.ContainerSpec) (*container, error) {
	what := "create container " + spec.Name
	if !validName.MatchString(spec.Name) {
		return nil, fmt.Errorf("%s: Invalid container name (%s), only [a-zA-Z0-9][a-zA-Z0-9_.-] are allowed", what, spec.Name)
	}
	if !e.images[spec.Image] {
		return nil, fmt.Errorf("%s: %w: No such image: %s", what, docker.ErrNotFound, spec.Image)
	}
	mode := spec.Network
	if mode == "" {
		mode = "bridge"
	}
	n := e.network(mode)
	if n == nil {
		return nil, fmt.Errorf("%s: %w: network %s not found", what, docker.ErrNotFound, mode)
	}
	for _, m := range spec.Mounts {
		switch m.Type {
		case docker.MountBind:
			if _, err := os.Stat(m.Source); err != nil {
				return nil, fmt.Errorf("%s: invalid mount config for type \"bind\": bind source path does not exist: %s", what, m.Source)
			}
		case docker.MountVolume:
			if _, ok := e.volumes[m.Source]; !ok && m.Source != "" {
				if _, err := e.createVolume(m.Source, m.Labels); err != nil {
					return nil, fmt.Errorf("%s: %w", what, err)
				}
			}
		}
	}
	spec = copySpec(spec)
	c := &container{id: e.newID(), spec: spec, state: stateCreated, exitCode: 0, ips: map[string]attachment{}, created: now()}
	c.ips[n.id] = attachment{network: n.name, ip: spec.IPv4Address}
	if spec.IPv4Address == "" {
		c.ips[n.id] = attachment{network: n.name, ip: n.address()}
	}
	e.containers[c.id] = c
	e.emit(docker.ActionCreate, c)
	return c, nil
}

func copySpec(spec docker.ContainerSpec) docker.ContainerSpec {
	spec.Labels = copyLabels(spec.Labels)
	spec.Mounts = append([]docker.Mount(nil), spec.Mounts...)
	spec.Env = append([]string(nil), spec.Env...)
	spec.ExtraNetworks = append([]string(nil), spec.ExtraNetworks...)
	return spec
}

// start starts a created or exited container: its networks must still
// exist. The caller holds e.mu.
func (e *Engine) start(c *container) error {
	for id, a := range c.ips {
		if _, ok := e.networks[id]; !ok {
			return fmt.Errorf("%w: network %s not found", docker.ErrNotFound, a.network)
		}
	}
	e.seq++
	c.state, c.exitCode, c.startedAt, c.pid = stateRunning, 0, now(), 10000+e.seq
	e.emit(docker.ActionStart, c)
	return nil
}

// destroy removes a container, killing it first. The caller holds e.mu.
func (e *Engine) destroy(c *container) {
	if c.running() {
		c.state, c.exitCode = stateExited, 137
		e.emit(docker.ActionDie, c)
	}
	delete(e.containers, c.id)
	e.emit(docker.ActionDestroy, c)
}

// InspectContainer returns docker.ErrNotFound when the container does not
// exist.
func (e *Engine) InspectContainer(_ context.Context, name string) (*docker.Container, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.container(name)
	if err := e.check(OpInspectContainer, targets(name, c)...); err != nil {
		return nil, err
	}
	if c == nil {
		return nil, fmt.Errorf("inspect container %s: %w: No such container: %s", name, docker.ErrNotFound, name)
	}
	return c.report(e.volumes), nil
}

// ListContainers returns the containers, running or not, carrying all the
// labels, as the engine's list reports them: no exit code (-1), user,
// process or start time.
func (e *Engine) ListContainers(_ context.Context, labels map[string]string) ([]docker.Container, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.check(OpListContainers); err != nil {
		return nil, err
	}
	out := []docker.Container{}
	for _, c := range e.containers {
		if !labelsMatch(c.spec.Labels, labels) {
			continue
		}
		r := c.report(e.volumes)
		r.ExitCode, r.User, r.Pid, r.StartedAt = -1, "", 0, time.Time{}
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// RemoveContainer kills and removes the container; it succeeds when it is
// already gone. Named volumes stay.
func (e *Engine) RemoveContainer(_ context.Context, name string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.container(name)
	if err := e.check(OpRemoveContainer, targets(name, c)...); err != nil {
		return err
	}
	if c != nil {
		e.destroy(c)
	}
	return nil
}

// RenameContainer renames the container named from to the name to, by its
// name only: ErrNotFound when none has the name, ErrConflict when another
// has the name to.
func (e *Engine) RenameContainer(_ context.Context, from, to string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	from = strings.TrimPrefix(from, "/")
	if strings.Trim(from, "0123456789abcdef") == "" {
		return fmt.Errorf("rename container %s: %w: a name of hex digits only could name another container's ID", from, docker.ErrConflict)
	}
	var c *container
	for _, have := range e.containers {
		switch have.spec.Name {
		case from:
			c = have
		case to:
			return fmt.Errorf("rename container %s to %s: %w", from, to, docker.ErrConflict)
		}
	}
	if err := e.check(OpRenameContainer, targets(from, c)...); err != nil {
		return err
	}
	if c == nil {
		return fmt.Errorf("rename container %s: %w", from, docker.ErrNotFound)
	}
	// The engine's rename event is not among those the controller
	// subscribes to: none is emitted.
	c.spec.Name = to
	return nil
}

// Exit ends the container's first process with the exit code, as a crash
// or an out-of-memory kill would (oom also reports the engine's oom event);
// the container stays, exited.
func (e *Engine) Exit(name string, code int, oom bool) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.container(name)
	if c == nil {
		return fmt.Errorf("container %s: %w", name, docker.ErrNotFound)
	}
	if !c.running() {
		return nil
	}
	if oom {
		e.emit(docker.ActionOOM, c)
	}
	c.state, c.exitCode, c.processes = stateExited, code, nil
	e.emit(docker.ActionDie, c)
	return nil
}

// StopContainer stops a running container and keeps it, as a SIGTERM its
// first process obeys would (exit code 143); it succeeds when the
// container is already stopped.
func (e *Engine) StopContainer(_ context.Context, name string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.container(name)
	if err := e.check(OpStopContainer, targets(name, c)...); err != nil {
		return err
	}
	if c == nil {
		return fmt.Errorf("stop container %s: %w: No such container: %s", name, docker.ErrNotFound, name)
	}
	if c.running() {
		c.state, c.exitCode, c.processes, c.execs = stateExited, 143, nil, 0
		e.emit(docker.ActionDie, c)
	}
	return nil
}

// StartContainer starts a stopped container again; it succeeds when it
// runs already.
func (e *Engine) StartContainer(_ context.Context, name string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.container(name)
	if err := e.check(OpStartContainer, targets(name, c)...); err != nil {
		return err
	}
	if c == nil {
		return fmt.Errorf("start container %s: %w: No such container: %s", name, docker.ErrNotFound, name)
	}
	if c.running() {
		return nil
	}
	if err := e.start(c); err != nil {
		return fmt.Errorf("%w: %w", docker.ErrStartFailed, err)
	}
	return nil
}

// RunningExecs counts the Execs in flight in the container.
func (e *Engine) RunningExecs(_ context.Context, name string) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.container(name)
	if err := e.check(OpRunningExecs, targets(name, c)...); err != nil {
		return 0, err
	}
	if c == nil {
		return 0, fmt.Errorf("inspect container %s: %w: No such container: %s", name, docker.ErrNotFound, name)
	}
	if !c.running() {
		return 0, nil
	}
	return c.execs, nil
}
