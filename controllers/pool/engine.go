package pool

import (
	"context"

	"afe.dev/sandbox/docker"
)

// Engine is what the SandboxPool reconciler asks of the Docker engine: the
// members' image, workspace volumes and containers, the internal networks
// and proxies of members with egress, the runtimes it offers and whether it
// has a storage quota.
type Engine interface {
	EnsureImage(ctx context.Context, ref string) error

	EnsureVolume(ctx context.Context, spec docker.VolumeSpec) (*docker.Volume, error)
	ListVolumes(ctx context.Context, labels map[string]string) ([]docker.Volume, error)
	RemoveVolume(ctx context.Context, name string) error

	EnsureNetwork(ctx context.Context, spec docker.NetworkSpec) (*docker.Network, error)
	InspectNetwork(ctx context.Context, name string) (*docker.Network, error)
	ListNetworks(ctx context.Context, labels map[string]string) ([]docker.Network, error)
	RemoveNetwork(ctx context.Context, name string) error

	RunContainer(ctx context.Context, spec docker.ContainerSpec) (*docker.Container, error)
	InspectContainer(ctx context.Context, name string) (*docker.Container, error)
	ListContainers(ctx context.Context, labels map[string]string) ([]docker.Container, error)
	RemoveContainer(ctx context.Context, name string) error
	Exec(ctx context.Context, container string, spec docker.ExecSpec) (int, error)

	Runtime(ctx context.Context, name string) (docker.Runtime, error)
	StorageQuota(ctx context.Context) (bool, error)
}
