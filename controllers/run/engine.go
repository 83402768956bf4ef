package run

import (
	"context"

	"afe.dev/sandbox/docker"
)

// Engine is what the Run reconciler asks of the Docker engine: the sandbox
// container an attempt executes in, its commands and their processes (the
// containment), and the volumes and copy of a snapshot.
type Engine interface {
	InspectContainer(ctx context.Context, name string) (*docker.Container, error)
	RemoveContainer(ctx context.Context, name string) error
	Exec(ctx context.Context, container string, spec docker.ExecSpec) (int, error)
	GroupProcesses(ctx context.Context, container string, gid int) ([]docker.Process, error)

	EnsureVolume(ctx context.Context, spec docker.VolumeSpec) (*docker.Volume, error)
	InspectVolume(ctx context.Context, name string) (*docker.Volume, error)
	ListVolumes(ctx context.Context, labels map[string]string) ([]docker.Volume, error)
	RemoveVolume(ctx context.Context, name string) error
	ListContainers(ctx context.Context, labels map[string]string) ([]docker.Container, error)
	CopyWorkspace(ctx context.Context, spec docker.CopySpec) (int64, error)
}
