package enginespec

import "time"

// MountType is the kind of a mount.
type MountType string

const (
	// MountVolume mounts a named volume.
	MountVolume MountType = "volume"
	// MountBind mounts a host folder.
	MountBind MountType = "bind"
)

// Owner is a numeric user and group.
type Owner struct {
	UID int
	GID int
}

// Mount is one mount of a container.
type Mount struct {
	Type   MountType
	Source string
	Target string
	// Owner, when set, makes the mount point owned by this user and group
	// before the container starts (for fresh volumes, which Docker creates
	// owned by root).
	Owner *Owner
	// Labels label the volume should the engine have to create it, as it
	// does for a volume mount whose volume was removed meanwhile: such a
	// volume is then found and removed by its labels like the one it
	// replaces, instead of being left behind unlabelled.
	Labels map[string]string `json:",omitempty"`
	// NoCopy keeps the engine from copying the image's content at the
	// mount point (and its owner) into an empty volume.
	NoCopy bool `json:",omitempty"`
}

// Ulimit is one resource limit (RLIMIT_*) of a container.
type Ulimit struct {
	Name string
	Soft int64
	Hard int64
}

// ContainerSpec is a container to run.
type ContainerSpec struct {
	Name       string
	Image      string
	Entrypoint []string
	Command    []string
	User       string
	WorkingDir string
	// Env lists KEY=VALUE pairs; nothing else is added.
	Env    []string
	Labels map[string]string
	Mounts []Mount

	// Network is "none" or the network the container is attached to first;
	// Aliases are its names on that network and IPv4Address its fixed
	// address there, when set.
	Network     string
	Aliases     []string
	IPv4Address string
	// ExtraNetworks are attached after creation, before start.
	ExtraNetworks []string
	// DNS are the upstream servers of the engine's embedded resolver for
	// this container.
	DNS []string
	// ExtraHosts are NAME:ADDRESS lines the engine writes into the
	// container's /etc/hosts, which every runtime reads as a plain file.
	ExtraHosts []string `json:",omitempty"`

	NanoCPUs    int64
	MemoryBytes int64
	PidsLimit   int64
	Ulimits     []Ulimit

	// Runtime is the OCI runtime the engine runs the container with
	// ("runc", "runsc"); empty is the engine's default. (Omitted from JSON
	// when empty, so hashes of specs without it stay as they were.)
	Runtime string `json:",omitempty"`

	CapDrop         []string
	CapAdd          []string
	NoNewPrivileges bool
	ReadOnlyRootfs  bool
	// Tmpfs maps a path to its mount options.
	Tmpfs map[string]string
	// Init runs an init process as PID 1 that reaps zombies.
	Init bool
	// OpenStdin keeps the container's stdin open, held by the engine, so
	// that a process can block reading it: a sandbox's keep-alive, never
	// written to; a proxy's entrypoint, written to by the controller alone
	// (docker.Engine.Tell). (Omitted from JSON when false, so hashes of
	// specs without it stay as they were.)
	OpenStdin bool `json:",omitempty"`
	// StorageSizeBytes, when set, limits the writable layer (the storage
	// option size), on engines where StorageQuota is true.
	StorageSizeBytes int64 `json:",omitempty"`
	// Log, when set, is all of what the engine keeps of the container's
	// output: nothing of the engine's own defaults (daemon.json) applies.
	// Unset: the engine's defaults, unbounded unless its daemon.json says
	// otherwise.
	Log *LogConfig `json:",omitempty"`
	// ImageVolumes, when set, gives every VOLUME of the image that no
	// mount or tmpfs of the spec covers a named, labelled volume, so that
	// the engine makes no anonymous volume, which a container removed by
	// hand would leave behind unlabelled. (Not hashed: it follows the
	// identity and the image, which the spec names.)
	ImageVolumes *ImageVolumes `json:"-"`
}

// LogConfig bounds what the engine keeps of a container's output on its
// disk: the engine's "local" log driver (readable by `docker logs` and the
// engine's log API), uncompressed, in Files files of MaxFileBytes each.
type LogConfig struct {
	MaxFileBytes int64
	Files        int
}

// logEntryMax is the most one entry of the local log driver takes on disk:
// the engine cuts output into lines of at most 16 KiB, framed by a
// protobuf message with its time and stream and a length before and after.
const logEntryMax = 16<<10 + 256

// Bound is the most the engine keeps on disk: it rotates a file once it
// reached MaxFileBytes, so each file may pass it by one entry.
func (l LogConfig) Bound() int64 {
	return int64(l.Files) * (l.MaxFileBytes + logEntryMax)
}

// ImageVolumes names and labels the volumes made for an image's VOLUME
// paths.
type ImageVolumes struct {
	// Name is the volume's name for a VOLUME path (cleaned).
	Name   func(path string) string
	Labels map[string]string
}

// Container is what the engine reports of a container.
type Container struct {
	ID       string
	Name     string
	Image    string
	Labels   map[string]string
	State    string
	Running  bool
	ExitCode int
	// StartedAt is zero when it never started.
	StartedAt time.Time
	// Created is when the engine created it (to the second in a list).
	Created time.Time
	// IPs maps each attached network to the container's IPv4 address there.
	IPs map[string]string
	// User is the user the container's processes run as, as configured.
	User string
	// Runtime is the OCI runtime the container was created with; empty
	// for the engine's default (InspectContainer only).
	Runtime string
	// Pid is the host process ID of the container's first process while it
	// runs (InspectContainer only; zero otherwise).
	Pid int
	// Mounts are the container's mounts as the engine reports them.
	Mounts []MountPoint
}

// MountPoint is one mount of a container as the engine reports it.
type MountPoint struct {
	Type MountType
	// Source is the host path of a bind mount, or the volume's path on the
	// engine's host.
	Source      string
	Destination string
	// Name is the volume's name (volume mounts only).
	Name string
}
