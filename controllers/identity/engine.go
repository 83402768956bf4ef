package identity

import (
	"context"

	"afe.dev/sandbox/docker"
)

// The few engine methods each lookup of this package uses: each consumer of the
// engine names what it asks of it, as a small interface where it is used,
// and docker.Engine (or a fake) satisfies them all.

// ContainerInspector inspects a container by name or ID.
type ContainerInspector interface {
	// InspectContainer returns docker.ErrNotFound when the container does
	// not exist.
	InspectContainer(ctx context.Context, name string) (*docker.Container, error)
}

// VolumeInspector inspects a volume by name.
type VolumeInspector interface {
	// InspectVolume returns docker.ErrNotFound when the volume does not
	// exist.
	InspectVolume(ctx context.Context, name string) (*docker.Volume, error)
}

// ContainerLister lists the containers carrying labels.
type ContainerLister interface {
	ListContainers(ctx context.Context, labels map[string]string) ([]docker.Container, error)
}

// ContainerRemover lists and removes containers.
type ContainerRemover interface {
	ContainerLister
	RemoveContainer(ctx context.Context, name string) error
}

// VolumeRemover lists and removes volumes.
type VolumeRemover interface {
	ListVolumes(ctx context.Context, labels map[string]string) ([]docker.Volume, error)
	RemoveVolume(ctx context.Context, name string) error
}
