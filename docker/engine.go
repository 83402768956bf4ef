package docker

import (
	"context"
	"time"
)

// Engine is what the controller needs of a Docker engine.
type Engine interface {
	// Ping checks that the engine answers.
	Ping(ctx context.Context) error

	// EnsureImage makes the image present: used when it is there, pulled
	// otherwise. A failed pull is a *PullError.
	EnsureImage(ctx context.Context, ref string) error

	// EnsureVolume creates the volume unless it exists, and returns it. The
	// caller checks the labels of an existing volume.
	EnsureVolume(ctx context.Context, spec VolumeSpec) (*Volume, error)
	// InspectVolume returns ErrNotFound when the volume does not exist.
	InspectVolume(ctx context.Context, name string) (*Volume, error)
	// ListVolumes returns the volumes carrying all the labels.
	ListVolumes(ctx context.Context, labels map[string]string) ([]Volume, error)
	// RemoveVolume removes the volume; it succeeds when it is already gone.
	RemoveVolume(ctx context.Context, name string) error

	// RunContainer creates and starts the container. When a container of
	// that name exists with the spec's labels it is returned as it is (and
	// started if stopped); with other labels the call fails with ErrConflict.
	// A container that cannot be started is removed again.
	RunContainer(ctx context.Context, spec ContainerSpec) (*Container, error)
	// InspectContainer returns ErrNotFound when the container does not exist.
	InspectContainer(ctx context.Context, name string) (*Container, error)
	// ListContainers returns the containers, running or not, carrying all
	// the labels, in one request.
	ListContainers(ctx context.Context, labels map[string]string) ([]Container, error)
	// RemoveContainer kills and removes the container with its anonymous
	// volumes (an image's VOLUME lines), never a named volume; it succeeds
	// when it is already gone.
	RemoveContainer(ctx context.Context, name string) error
	// RenameContainer gives the container now named from the name to, by
	// its name (never by an ID, so that a container renamed meanwhile is
	// not the one renamed): ErrNotFound when no container has the name
	// from, ErrConflict when another has the name to. Two renames of one
	// name in flight at once may both succeed on the engine (it looks the
	// name up before it locks the container): whoever must rename a
	// container once serializes its renames itself.
	RenameContainer(ctx context.Context, from, to string) error
	// StopContainer stops a running container and keeps it (a suspended
	// sandbox's); it succeeds when it is already stopped and returns
	// ErrNotFound when there is none of the name.
	StopContainer(ctx context.Context, name string) error
	// StartContainer starts a stopped container as it was created; it
	// succeeds when it runs already. One the engine cannot start fails with
	// ErrStartFailed.
	StartContainer(ctx context.Context, name string) error
	// RunningExecs counts the commands executed in the container that still
	// run (zero for a container that does not run).
	RunningExecs(ctx context.Context, name string) (int, error)

	// EnsureNetwork creates the network unless it exists, and returns it.
	// The caller checks the labels of an existing network.
	EnsureNetwork(ctx context.Context, spec NetworkSpec) (*Network, error)
	// InspectNetwork returns ErrNotFound when the network does not exist.
	InspectNetwork(ctx context.Context, name string) (*Network, error)
	// ListNetworks returns the networks carrying all the labels.
	ListNetworks(ctx context.Context, labels map[string]string) ([]Network, error)
	// RemoveNetwork removes the network; it succeeds when it is already gone.
	RemoveNetwork(ctx context.Context, name string) error

	// CopyWorkspace copies a tree from one mount into another through
	// helper containers that never start, and removes them; it returns the
	// bytes copied.
	CopyWorkspace(ctx context.Context, spec CopySpec) (int64, error)
	// FillWorkspace writes a tar stream (a workspace moved from another
	// engine) into a mount through a helper container that never starts,
	// and removes it; it returns the bytes read.
	FillWorkspace(ctx context.Context, spec FillSpec) (int64, error)

	// Processes lists the processes of a running container from outside
	// the workload's reach: the engine's process list, or under a
	// user-space kernel (gVisor) that kernel's own.
	Processes(ctx context.Context, container string) ([]Process, error)

	// GroupProcesses lists, as Processes does, the processes that have the
	// group gid (real, effective or saved).
	GroupProcesses(ctx context.Context, container string, gid int) ([]Process, error)

	// Runtime returns the engine's OCI runtime of that name; ErrNotFound
	// when the engine has none.
	Runtime(ctx context.Context, name string) (Runtime, error)

	// Exec runs a command in a running container and returns its exit code.
	Exec(ctx context.Context, container string, spec ExecSpec) (int, error)
	// Tell writes a line to the stdin of a running container made with
	// OpenStdin and returns the first line of its stderr that answered
	// accepts; ErrNoAnswer when none came.
	Tell(ctx context.Context, container, line string, answered func(string) bool) (string, error)
	// InspectExec tells of an exec by its ID (its command, user and exit
	// code); ErrNotFound when the engine no longer has it.
	InspectExec(ctx context.Context, id string) (ExecInfo, error)
	// OwnExec tells whether this client created the exec, and ForgetExec
	// drops it from that memory once its end was seen.
	OwnExec(id string) bool
	ForgetExec(id string)

	// ContainerUsage reads what a running container has used: from the
	// host's cgroup files for a local engine whose files are visible here,
	// with no request; otherwise in one request per container (the engine
	// has no batched call for it).
	ContainerUsage(ctx context.Context, id string) (*ContainerUsage, error)
	// DiskUsage measures the writable layer of every container and every
	// volume that carries the labels: their bytes, and their inodes where
	// the engine's data is visible here.
	DiskUsage(ctx context.Context, labels map[string]string) (*DiskUsage, error)

	// StorageQuota is true when the engine's storage driver may limit a
	// container's writable layer (ContainerSpec.StorageSizeBytes); a
	// container asking for it where it cannot fails with
	// ErrStorageQuotaUnsupported.
	StorageQuota(ctx context.Context) (bool, error)

	// Events streams the events of containers carrying all the labels until
	// ctx ends or the connection breaks (an error on the second channel):
	// from now with a zero since, else first those the engine still holds
	// from since on (it keeps the last few hundred).
	Events(ctx context.Context, labels map[string]string, since time.Time) (<-chan Event, <-chan error)
}
