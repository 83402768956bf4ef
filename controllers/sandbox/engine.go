package sandbox

import (
	"context"

	"afe.dev/sandbox/docker"
)

// Engine is what the Sandbox reconciler asks of the Docker engine: the
// objects of a sandbox (its image, volumes, network, containers), the
// commands running in it (the idle timeout), the workspace copy of a
// restore, and what the engine offers (runtimes, a storage quota).
type Engine interface {
	EnsureImage(ctx context.Context, ref string) error

	EnsureVolume(ctx context.Context, spec docker.VolumeSpec) (*docker.Volume, error)
	InspectVolume(ctx context.Context, name string) (*docker.Volume, error)
	ListVolumes(ctx context.Context, labels map[string]string) ([]docker.Volume, error)
	RemoveVolume(ctx context.Context, name string) error
	CopyWorkspace(ctx context.Context, spec docker.CopySpec) (int64, error)
	FillWorkspace(ctx context.Context, spec docker.FillSpec) (int64, error)

	EnsureNetwork(ctx context.Context, spec docker.NetworkSpec) (*docker.Network, error)
	InspectNetwork(ctx context.Context, name string) (*docker.Network, error)
	ListNetworks(ctx context.Context, labels map[string]string) ([]docker.Network, error)
	RemoveNetwork(ctx context.Context, name string) error

	RunContainer(ctx context.Context, spec docker.ContainerSpec) (*docker.Container, error)
	InspectContainer(ctx context.Context, name string) (*docker.Container, error)
	ListContainers(ctx context.Context, labels map[string]string) ([]docker.Container, error)
	RemoveContainer(ctx context.Context, name string) error
	RenameContainer(ctx context.Context, from, to string) error
	StopContainer(ctx context.Context, name string) error
	StartContainer(ctx context.Context, name string) error
	RunningExecs(ctx context.Context, name string) (int, error)
	Exec(ctx context.Context, container string, spec docker.ExecSpec) (int, error)
	Tell(ctx context.Context, container, line string, answered func(string) bool) (string, error)

	Runtime(ctx context.Context, name string) (docker.Runtime, error)
	StorageQuota(ctx context.Context) (bool, error)
}
