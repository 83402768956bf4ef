// Package docker is the only package that talks to the Docker engine. It
// offers an intent-level, idempotent interface in the controller's own words:
// ensure calls succeed when the object already exists as wanted, remove calls
// succeed when it is already gone.
package docker

import (
	"errors"
	"time"

	"afe.dev/sandbox/internal/enginespec"
)

var (
	// ErrNotFound is returned when the object does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict is returned when an object with the name exists but is not
	// the one asked for (its labels differ).
	ErrConflict = errors.New("name taken by another object")
	// ErrUnavailable is returned when the engine cannot be reached.
	ErrUnavailable = errors.New("docker engine unavailable")
	// ErrStartFailed is returned when the engine created a container but
	// could not start it: its image's command or user, or its mounts, are
	// wrong. The container was removed.
	ErrStartFailed = errors.New("the engine could not start the container")
	// ErrExecNotCreated is returned by ExecStream when the engine made no
	// exec at all: nothing ran. Any later error may come after the command
	// started.
	ErrExecNotCreated = errors.New("the engine made no exec")
)

// The value types the rules share with the engine live in
// internal/enginespec, which links no Docker SDK; this package names them
// as its own.
type (
	// MountType is the kind of a mount.
	MountType = enginespec.MountType
	// Owner is a numeric user and group.
	Owner = enginespec.Owner
	// Mount is one mount of a container.
	Mount = enginespec.Mount
	// Ulimit is one resource limit (RLIMIT_*) of a container.
	Ulimit = enginespec.Ulimit
	// ContainerSpec is a container to run.
	ContainerSpec = enginespec.ContainerSpec
	// LogConfig bounds what the engine keeps of a container's output.
	LogConfig = enginespec.LogConfig
	// ImageVolumes names and labels the volumes made for an image's VOLUME
	// paths.
	ImageVolumes = enginespec.ImageVolumes
	// Container is what the engine reports of a container.
	Container = enginespec.Container
	// MountPoint is one mount of a container as the engine reports it.
	MountPoint = enginespec.MountPoint
	// VolumeSpec is a named volume.
	VolumeSpec = enginespec.VolumeSpec
	// Volume is what the engine reports of a volume.
	Volume = enginespec.Volume
	// NetworkSpec is a bridge network.
	NetworkSpec = enginespec.NetworkSpec
	// Network is what the engine reports of a network.
	Network = enginespec.Network
	// Runtime is an OCI runtime the engine has.
	Runtime = enginespec.Runtime
)

const (
	// MountVolume mounts a named volume.
	MountVolume = enginespec.MountVolume
	// MountBind mounts a host folder.
	MountBind = enginespec.MountBind
)

// EventAction is what happened to a container.
type EventAction string

// Container actions the controller reacts to.
const (
	ActionCreate  EventAction = "create"
	ActionStart   EventAction = "start"
	ActionDie     EventAction = "die"
	ActionDestroy EventAction = "destroy"
	ActionOOM     EventAction = "oom"
	// ActionExecStart and ActionExecDie are a command executed in the
	// container (docker exec, a Run) starting and ending.
	ActionExecStart EventAction = "exec_start"
	ActionExecDie   EventAction = "exec_die"
)

// Event is one container event.
type Event struct {
	Action EventAction
	// Detail is what the engine states after the action's verb: an exec's
	// command line, its words joined by spaces.
	Detail string
	ID     string
	Name   string
	Labels map[string]string
	Time   time.Time
}

// labelsMatch is true when every wanted label is present with its value.
func labelsMatch(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}
