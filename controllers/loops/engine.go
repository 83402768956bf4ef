package loops

import (
	"context"
	"time"

	"afe.dev/sandbox/controllers/identity"
	"afe.dev/sandbox/docker"
)

// What each loop asks of the Docker engine, named where it is used.

// SweepEngine lists and removes the labelled objects of the sweep.
type SweepEngine interface {
	ListContainers(ctx context.Context, labels map[string]string) ([]docker.Container, error)
	ListNetworks(ctx context.Context, labels map[string]string) ([]docker.Network, error)
	ListVolumes(ctx context.Context, labels map[string]string) ([]docker.Volume, error)
	RemoveContainer(ctx context.Context, name string) error
	RemoveNetwork(ctx context.Context, name string) error
	RemoveVolume(ctx context.Context, name string) error
}

// UsageEngine measures the containers and volumes of the sandboxes.
type UsageEngine interface {
	ListContainers(ctx context.Context, labels map[string]string) ([]docker.Container, error)
	// ListVolumes lists the claim records that bind pool members.
	ListVolumes(ctx context.Context, labels map[string]string) ([]docker.Volume, error)
	ContainerUsage(ctx context.Context, id string) (*docker.ContainerUsage, error)
	DiskUsage(ctx context.Context, labels map[string]string) (*docker.DiskUsage, error)
}

// EventEngine streams the engine's events, and tells the commands this
// process executed from those others did (the telemetry of the latter);
// the claim records it inspects bind pool members to their Sandboxes.
type EventEngine interface {
	Events(ctx context.Context, labels map[string]string, since time.Time) (<-chan docker.Event, <-chan error)
	identity.VolumeInspector
	execEngine
}

// execEngine inspects the commands executed in sandbox containers.
type execEngine interface {
	InspectExec(ctx context.Context, id string) (docker.ExecInfo, error)
	OwnExec(id string) bool
	ForgetExec(id string)
}
