package pool

import (
	"context"

	"afe.dev/sandbox/docker"
)

// Engine is what the SandboxPool reconciler asks of the Docker engine: the
// members' image, workspace volumes and containers, the runtimes it offers
// and whether it has a storage quota.
type Engine interface {
	EnsureImage(ctx context.Context, ref string) error

	EnsureVolume(ctx context.Context, spec docker.VolumeSpec) (*docker.Volume, error)
	ListVolumes(ctx context.Context, labels map[string]string) ([]docker.Volume, error)
	RemoveVolume(ctx context.Context, name string) error

	RunContainer(ctx context.Context, spec docker.ContainerSpec) (*docker.Container, error)
	InspectContainer(ctx context.Context, name string) (*docker.Container, error)
	ListContainers(ctx context.Context, labels map[string]string) ([]docker.Container, error)
	RemoveContainer(ctx context.Context, name string) error

	Runtime(ctx context.Context, name string) (docker.Runtime, error)
	StorageQuota(ctx context.Context) (bool, error)
}
