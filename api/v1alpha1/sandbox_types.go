package v1alpha1

import (
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SandboxFinalizer is set on every Sandbox so that its Docker objects are
// removed before the Sandbox goes away.
const SandboxFinalizer = "sandbox.afe.dev/cleanup"

// ResumeRequestedAnnotation is an RFC 3339 time (`kubectl afe resume` sets
// it) that counts as the sandbox's activity then: a sandbox its idle timeout
// suspended is resumed, and its idle timer starts again from it. A time
// later than now counts as now.
const ResumeRequestedAnnotation = "sandbox.afe.dev/resume-requested"

// ResumeRequestPatch is the JSON merge patch that asks for a Sandbox's
// resume at now: ResumeRequestedAnnotation set to now, in UTC. `kubectl afe
// resume` adds spec.suspend to it; the access API sends it as it is.
func ResumeRequestPatch(now time.Time) map[string]any {
	return map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		ResumeRequestedAnnotation: now.UTC().Format(time.RFC3339),
	}}}
}

// WorkspaceType says where a sandbox's /workspace lives.
// +kubebuilder:validation:Enum=Volume;Folder
type WorkspaceType string

const (
	// WorkspaceVolume is a named Docker volume, one per ticket.
	WorkspaceVolume WorkspaceType = "Volume"
	// WorkspaceFolder is a host folder under the controller's
	// --workspace-root, in the folder of the Sandbox's namespace.
	WorkspaceFolder WorkspaceType = "Folder"
)

// DiskEnforcement says how resources.disk is enforced on the engine.
// +kubebuilder:validation:Enum=StorageQuota;ReadOnlyRoot
type DiskEnforcement string

const (
	// DiskStorageQuota is a writable layer the engine limits to the limit
	// (--storage-opt size: overlay2 on xfs with project quotas); the
	// workspace is measured.
	DiskStorageQuota DiskEnforcement = "StorageQuota"
	// DiskReadOnlyRoot is a read-only root filesystem with a size-bounded
	// tmpfs at /tmp, where the engine cannot limit the writable layer; the
	// workspace is measured.
	DiskReadOnlyRoot DiskEnforcement = "ReadOnlyRoot"
)

// SandboxPhase is a one-word summary of where a Sandbox is in its life.
// +kubebuilder:validation:Enum=Pending;Provisioning;Ready;Recreating;Suspended;Failed;Terminating
type SandboxPhase string

// The phases of a Sandbox.
const (
	SandboxPending      SandboxPhase = "Pending"
	SandboxProvisioning SandboxPhase = "Provisioning"
	SandboxReady        SandboxPhase = "Ready"
	SandboxRecreating   SandboxPhase = "Recreating"
	// SandboxSuspended: the container and proxy are stopped, the workspace
	// and network kept; a Run or spec.suspend=false resumes it.
	SandboxSuspended   SandboxPhase = "Suspended"
	SandboxFailed      SandboxPhase = "Failed"
	SandboxTerminating SandboxPhase = "Terminating"
)

// Condition types of a Sandbox.
const (
	// SandboxReadyCondition is true when the workspace, the egress path (if
	// any) and the container are all ready: Runs can execute.
	SandboxReadyCondition = "Ready"
	// WorkspaceReadyCondition is true when the workspace volume or folder is
	// in place.
	WorkspaceReadyCondition = "WorkspaceReady"
	// EgressReadyCondition is true when the sandbox has no egress or when its
	// network and proxy are ready and the proxy answers.
	EgressReadyCondition = "EgressReady"
	// ContainerReadyCondition is true when the sandbox container runs with the
	// current spec.
	ContainerReadyCondition = "ContainerReady"
)

// Condition reasons of a Sandbox.
const (
	// ReadyReason: the object is ready.
	ReadyReason = "Ready"
	// ProvisioningReason: the object is being created.
	ProvisioningReason = "Provisioning"
	// NotPlacedReason: in per-node mode, a Sandbox runs only as part of a
	// Ticket, which kube-scheduler places; this one has none.
	NotPlacedReason = "NotPlaced"
	// InvalidSpecReason: the spec cannot be honoured; the message says what to
	// fix. Nothing was created in Docker.
	InvalidSpecReason = "InvalidSpec"
	// DeniedEnvReason: an env name is on the controller's --deny-env list.
	DeniedEnvReason = "DeniedEnv"
	// ControllerEnvNotAllowedReason: an env valueFrom.controllerEnv names a
	// variable the controller's --env-passthrough does not list, or one it
	// lists but does not have.
	ControllerEnvNotAllowedReason = "ControllerEnvNotAllowed"
	// SecretNotFoundReason: an env valueFrom names a missing Secret or key.
	SecretNotFoundReason = "SecretNotFound"
	// SecretNotAllowedReason: an env valueFrom names a Secret that holds
	// Kubernetes API credentials (a service-account token or a bootstrap
	// token), which never enter a sandbox. Nothing was created.
	SecretNotAllowedReason = "SecretNotAllowed"
	// RuntimeNotAllowedReason: spec.runtime is not on the controller's
	// --runtimes list; nothing is created.
	RuntimeNotAllowedReason = "RuntimeNotAllowed"
	// RuntimeUnavailableReason: the runtime is allowed but the engine has
	// no runtime of that name; retried.
	RuntimeUnavailableReason = "RuntimeUnavailable"
	// UserNotAllowedReason: the user's uid or gid is refused by the
	// controller's policy (--deny-gids, --allowed-uids, --allowed-gids, or a
	// gid of the controller's Run groups). Nothing was created, and a
	// container of the sandbox running as such a user is removed.
	UserNotAllowedReason = "UserNotAllowed"
	// SandboxIDsExhaustedReason: the sandbox names no user and every id of
	// the controller's --sandbox-id-range is held by another sandbox on the
	// engine; the controller looks again periodically (widen the range, or
	// remove sandboxes).
	SandboxIDsExhaustedReason = "SandboxIDsExhausted"
	// DiskQuotaExceededReason: the workspace grew past resources.disk; the
	// container was stopped and is not started again while the workspace
	// is over the limit (raise the limit to start it; the workspace is
	// kept).
	DiskQuotaExceededReason = "DiskQuotaExceeded"
	// WorkspaceOutsideRootReason: a Folder workspace is not strictly inside
	// <workspace-root>/<namespace>/ of the Sandbox's namespace (or climbs
	// out with ..), or Folder workspaces are disabled.
	WorkspaceOutsideRootReason = "WorkspaceOutsideRoot"
	// WorkspaceMissingReason: a component of a Folder workspace's path does
	// not exist (yet). Nothing was created; the controller looks again every
	// few seconds, so creating the folder is enough.
	WorkspaceMissingReason = "WorkspaceMissing"
	// WorkspaceSymlinkReason: a component of a Folder workspace's path, from
	// --workspace-root down, is a symbolic link. Nothing was created.
	WorkspaceSymlinkReason = "WorkspaceSymlink"
	// WorkspaceConflictReason: a Folder workspace contains, or is inside,
	// the folder of another Sandbox, or is the same folder as a Sandbox of
	// another ticket. Both Sandboxes are refused and their containers
	// removed until one of them changes; the message names the other.
	WorkspaceConflictReason = "WorkspaceConflict"
	// WorkspaceNotSharedReason: the Docker engine is not on a local unix
	// socket and the controller was not told (--workspace-root-shared) that
	// the engine sees --workspace-root at the same path: Folder workspaces
	// are refused.
	WorkspaceNotSharedReason = "WorkspaceNotShared"
	// WorkspaceMountMismatchReason: what the engine mounted at /workspace is
	// not the folder the controller checked (the path was swapped between
	// the check and the mount). The container was removed at once.
	WorkspaceMountMismatchReason = "WorkspaceMountMismatch"
	// WorkspaceRootUnsafeReason: the controller's --workspace-root (or the
	// folder) is on a file system not mounted nosuid,nodev, so a setuid
	// program or a device file a workload leaves in its folder would work
	// for the host's users, and the controller was not started with
	// --workspace-root-allow-suid. Folder workspaces are refused and their
	// containers removed; the message says how to mount the root.
	WorkspaceRootUnsafeReason = "WorkspaceRootUnsafe"
	// ContainerStartFailedReason: the engine created the sandbox's container
	// but could not start it (the image's command or user is wrong; the
	// message has the engine's words). Nothing is left of it; the
	// controller tries again every 30 s, and at once when the spec changes.
	ContainerStartFailedReason = "ContainerStartFailed"
	// ImagePullFailedReason: the image is not present and could not be pulled;
	// retried with backoff.
	ImagePullFailedReason = "ImagePullFailed"
	// EngineUnavailableReason: the Docker engine could not be reached.
	EngineUnavailableReason = "EngineUnavailable"
	// NameConflictReason: a Docker object with the sandbox's name belongs to
	// another Sandbox or controller instance and is never adopted.
	NameConflictReason = "NameConflict"
	// NoEgressReason: the sandbox declares no egress and has no network.
	NoEgressReason = "NoEgress"
	// SandboxLostReason: the container disappeared or exited and is
	// being recreated with a fresh workspace.
	SandboxLostReason = "SandboxLost"
	// MovedReason: the workspace was moved from the node the sandbox ran
	// on before its ticket's node was drained (WorkspaceReady).
	MovedReason = "Moved"
	// SpecChangedReason: the container no longer matches the spec and is being
	// recreated (the workspace is kept).
	SpecChangedReason = "SpecChanged"
	// DeletingReason: the sandbox is being deleted.
	DeletingReason = "Deleting"
	// EgressNetworkMissingReason: the controller's --egress-network does not
	// exist on the engine.
	EgressNetworkMissingReason = "EgressNetworkMissing"
	// AddressPoolExhaustedReason: no subnet is left for the sandbox's
	// internal network: every /29 block of the controller's --egress-subnets
	// is in use (or, with that flag empty, the engine's default-address-pools
	// are used up).
	AddressPoolExhaustedReason = "AddressPoolExhausted"
	// ProxyNotAnsweringReason: the egress proxy runs but does not answer, or
	// exited (a bad allowlist stops it with a message in its log).
	ProxyNotAnsweringReason = "ProxyNotAnswering"
	// EgressChangedReason: the proxy was given a changed allowlist in
	// place; its connections were kept.
	EgressChangedReason = "EgressChanged"
	// ProxyRecreatedReason: the egress proxy was lost or reconfigured and
	// was recreated; the sandbox container was kept.
	ProxyRecreatedReason = "ProxyRecreated"
	// SnapshotNotFoundReason: workspace.fromSnapshot names no snapshot volume
	// of this namespace and controller instance. Nothing was created.
	SnapshotNotFoundReason = "SnapshotNotFound"
	// SnapshotTooLargeReason: workspace.fromSnapshot holds more than the
	// sandbox's resources.disk (each file counted at its full size), or a
	// sparse file; nothing of it is kept in the workspace.
	SnapshotTooLargeReason = "SnapshotTooLarge"
	// SuspendedReason: the sandbox is suspended (spec.suspend, or idle for
	// lifecycle.idleTimeoutSeconds): its container and proxy are stopped,
	// its workspace and network kept. A Run of the sandbox, or
	// spec.suspend=false, resumes it; a stopped container of a suspended
	// sandbox is not a loss.
	SuspendedReason = "Suspended"
	// ResumedReason: the Event of a suspended sandbox started again.
	ResumedReason = "Resumed"
	// DeadlineExceededReason: the sandbox (or its ticket) ran past
	// lifecycle.activeDeadlineSeconds. A Sandbox's container and proxy are
	// stopped and not started again; a Ticket ends Failed and is cleaned up.
	DeadlineExceededReason = "DeadlineExceeded"
	// RestoredFromSnapshotReason: the workspace volume was filled from
	// workspace.fromSnapshot (WorkspaceReady is true).
	RestoredFromSnapshotReason = "RestoredFromSnapshot"
)

// MaxSandboxSnapshots is how many snapshots status.snapshots lists: the
// most recent ones.
const MaxSandboxSnapshots = 64

// TicketReference names the Ticket that owns a Sandbox.
type TicketReference struct {
	// name of the Ticket in the Sandbox's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	Name string `json:"name"`
}

// SandboxResources are the limits of the sandbox container. The quantities
// are pointers so that clients leaving them out get the defaults.
type SandboxResources struct {
	// cpu is the CPU limit, as a Kubernetes quantity ("1", "500m").
	// +kubebuilder:default="1"
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isGreaterThan(quantity('9m')) && quantity(string(self)).isLessThan(quantity('65'))",message="cpu must be between 10m and 64"
	// +optional
	CPU *resource.Quantity `json:"cpu,omitempty"`

	// memory is the memory limit; swap is off, so it is also the memory+swap
	// limit. A quantity ("512Mi", "2Gi"), at least 16Mi.
	// +kubebuilder:default="1Gi"
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).compareTo(quantity('16Mi')) >= 0 && quantity(string(self)).compareTo(quantity('256Gi')) <= 0",message="memory must be between 16Mi and 256Gi"
	// +optional
	Memory *resource.Quantity `json:"memory,omitempty"`

	// pids is the maximum number of processes and threads in the sandbox.
	// +kubebuilder:default=512
	// +kubebuilder:validation:Minimum=16
	// +kubebuilder:validation:Maximum=65536
	// +optional
	Pids int64 `json:"pids,omitempty"`

	// fileSize is the largest file a sandbox process may write (RLIMIT_FSIZE);
	// a larger write fails with EFBIG ("File too large"), or kills a process
	// that does not ignore SIGXFSZ.
	// +kubebuilder:default="1Gi"
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).compareTo(quantity('1Mi')) >= 0 && quantity(string(self)).compareTo(quantity('1Ti')) <= 0",message="fileSize must be between 1Mi and 1Ti"
	// +optional
	FileSize *resource.Quantity `json:"fileSize,omitempty"`

	// disk bounds what the sandbox may write to disk (a quantity, "2Gi"):
	// the workspace volume is measured by the controller, and the sandbox
	// is stopped with reason DiskQuotaExceeded when it passes the limit;
	// the writable layer is limited by the engine where it supports it
	// (overlay2 on xfs with project quotas), and otherwise the root
	// filesystem is read-only with a tmpfs at /tmp (at most the limit and
	// half the memory). status.diskEnforcement says which holds. No file
	// may be larger than the limit either. Unset: no disk limit, a writable
	// root filesystem.
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).compareTo(quantity('1Mi')) >= 0 && quantity(string(self)).compareTo(quantity('64Ti')) <= 0",message="disk must be between 1Mi and 64Ti"
	// +optional
	Disk *resource.Quantity `json:"disk,omitempty"`

	// inodes bounds how many files, directories and other entries the
	// sandbox may hold in its workspace, the volumes of its image and its
	// writable layer together, all on the engine's filesystem, whose inodes
	// every tenant shares. They are counted by the controller with the
	// disk (every --disk-check-period), and the sandbox is stopped with
	// reason DiskQuotaExceeded when it passes the bound. Unset: one per
	// 4Ki of resources.disk, at least 65536, or the controller's
	// --max-inodes without resources.disk; never more than --max-inodes.
	// +kubebuilder:validation:Minimum=256
	// +kubebuilder:validation:Maximum=1073741824
	// +optional
	Inodes *int64 `json:"inodes,omitempty"`

	// openFiles is how many files a sandbox process may hold open
	// (RLIMIT_NOFILE).
	// +kubebuilder:default=4096
	// +kubebuilder:validation:Minimum=64
	// +kubebuilder:validation:Maximum=1048576
	// +optional
	OpenFiles int64 `json:"openFiles,omitempty"`

	// cpuSeconds is how many seconds of CPU time each process of the
	// sandbox may use (RLIMIT_CPU, as docker run --ulimit cpu does): a
	// process that reaches it gets SIGXCPU, and SIGKILL one second later
	// if it survives that. A Run that ends so says the limit was reached.
	// Under runsc only the process a Run step or an exec starts is held to
	// it, not a child it starts, nor the sandbox's own command
	// (docs/threat-model.md). Unset: no limit.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=31536000
	// +optional
	CPUSeconds int64 `json:"cpuSeconds,omitempty"`
}

// SecretKeySelector selects a key of a Secret in the Sandbox's namespace.
// Secrets of type kubernetes.io/service-account-token and
// bootstrap.kubernetes.io/token are refused (reason SecretNotAllowed).
type SecretKeySelector struct {
	// name of the Secret, in the Sandbox's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
	// key in the Secret's data.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key"`
}

// EnvVarSource is where an environment variable's value comes from: one
// of secretKeyRef and controllerEnv.
// +kubebuilder:validation:XValidation:rule="has(self.secretKeyRef) != has(self.controllerEnv)",message="set one of secretKeyRef and controllerEnv"
type EnvVarSource struct {
	// secretKeyRef reads the value from a key of a Secret.
	// +optional
	SecretKeyRef *SecretKeySelector `json:"secretKeyRef,omitempty"`
	// controllerEnv names a variable of the controller's own environment
	// that the operator passes through (--env-passthrough); any other name
	// is refused with reason ControllerEnvNotAllowed, and the deny list
	// still wins. Nothing else of the controller's environment ever
	// enters a sandbox.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z_][A-Za-z0-9_]*$`
	// +optional
	ControllerEnv string `json:"controllerEnv,omitempty"`
}

// EnvVar is one environment variable of the sandbox. Only declared variables
// reach it; the controller's own environment is never copied.
// +kubebuilder:validation:XValidation:rule="!(has(self.value) && has(self.valueFrom))",message="set value or valueFrom, not both"
type EnvVar struct {
	// name of the variable. Names on the controller's --deny-env list are
	// refused.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z_][A-Za-z0-9_]*$`
	Name string `json:"name"`
	// value of the variable.
	// +kubebuilder:validation:MaxLength=32768
	// +optional
	Value string `json:"value,omitempty"`
	// valueFrom reads the value from a Secret, or from the controller's
	// environment, instead.
	// +optional
	ValueFrom *EnvVarSource `json:"valueFrom,omitempty"`
}

// WorkspaceSpec says what is mounted at /workspace.
// +kubebuilder:validation:XValidation:rule="(has(self.type) && self.type == 'Folder') ? has(self.hostPath) : !has(self.hostPath)",message="hostPath is required for a Folder workspace and not allowed for a Volume workspace"
// +kubebuilder:validation:XValidation:rule="!has(self.fromSnapshot) || !has(self.type) || self.type == 'Volume'",message="fromSnapshot is only for a Volume workspace"
type WorkspaceSpec struct {
	// type is Volume (a named Docker volume, one per ticket, shared by all its
	// scopes) or Folder (a host folder).
	// +kubebuilder:default=Volume
	// +optional
	Type WorkspaceType `json:"type,omitempty"`

	// hostPath is the host folder of a Folder workspace: an existing folder
	// strictly inside <workspace-root>/<namespace>/ (the controller's
	// --workspace-root and the Sandbox's namespace), with no symbolic link
	// on any component from the root down and no "." or "..". No two
	// Sandboxes may use nested folders, and only Sandboxes of one ticket
	// may share a folder.
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:Pattern=`^/[^\x00\n]*$`
	// +optional
	HostPath string `json:"hostPath,omitempty"`

	// fromSnapshot names a snapshot volume, afe-<key>_snap-<n> (or -snap-<n>
	// from before the upgrade), made by a
	// Snapshot Run in this namespace: the workspace volume starts as a copy
	// of it, when it is created and when it is recreated after a loss.
	// Changing it later leaves the current workspace as it is. A missing
	// snapshot stops the sandbox with reason SnapshotNotFound before
	// anything is created. Volume workspaces only.
	// +kubebuilder:validation:MaxLength=200
	// +kubebuilder:validation:Pattern=`^afe-[A-Za-z0-9][A-Za-z0-9_.-]*[-_]snap-[0-9]{1,9}$`
	// +optional
	FromSnapshot string `json:"fromSnapshot,omitempty"`
}

// SandboxLifecycle bounds how long a sandbox runs, idle or at all.
type SandboxLifecycle struct {
	// idleTimeoutSeconds suspends the sandbox when, for that long, no Run
	// of it was Pending or Running and no command ran in its container
	// (docker exec, kubectl afe shell or exec: the controller sees them in
	// the engine's events). 0 or unset: never. At most 30 days.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2592000
	// +optional
	IdleTimeoutSeconds int64 `json:"idleTimeoutSeconds,omitempty"`
	// activeDeadlineSeconds is how long, from its creation, the sandbox (or
	// the ticket) may exist before it is ended with reason
	// DeadlineExceeded. 0 or unset: no deadline. At most 366 days.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=31622400
	// +optional
	ActiveDeadlineSeconds int64 `json:"activeDeadlineSeconds,omitempty"`
}

// IdleTimeout is lifecycle.idleTimeoutSeconds; zero is never.
func (l *SandboxLifecycle) IdleTimeout() time.Duration {
	if l == nil {
		return 0
	}
	return time.Duration(l.IdleTimeoutSeconds) * time.Second
}

// ActiveDeadline is lifecycle.activeDeadlineSeconds; zero is none.
func (l *SandboxLifecycle) ActiveDeadline() time.Duration {
	if l == nil {
		return 0
	}
	return time.Duration(l.ActiveDeadlineSeconds) * time.Second
}

// SandboxTemplateSpec holds the fields of a sandbox shared by a Sandbox and a
// Ticket's sandbox template.
// +kubebuilder:validation:XValidation:rule="!has(self.resources) || !has(self.resources.disk) || !has(self.workspace) || !has(self.workspace.type) || self.workspace.type != 'Folder'",message="resources.disk is not enforced on a Folder workspace (its host folder is the operator's); use a Volume workspace"
type SandboxTemplateSpec struct {
	// image is the container image of the sandbox. It is used when present on
	// the engine and pulled otherwise.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^[a-z0-9][a-z0-9._/:@-]*$`
	Image string `json:"image"`

	// command is the container's long-running process. When unset the
	// controller runs an idle keep-alive that needs nothing in the image but
	// /bin/sh (it blocks reading a stdin the engine keeps open). Commands are
	// executed with Runs.
	// +kubebuilder:validation:MaxItems=256
	// +optional
	Command []string `json:"command,omitempty"`

	// runtime is the OCI runtime the sandbox's container runs under, by the
	// name the engine knows it: "runc" (the host's kernel) or a user-space
	// kernel such as gVisor's "runsc" for hostile code (hack/install-runsc.sh
	// registers it). It must be on the controller's --runtimes list (reason
	// RuntimeNotAllowed otherwise, nothing created); unset, the controller's
	// --default-runtime. A listed runtime the engine lacks is
	// RuntimeUnavailable, retried. A change recreates the container, keeping
	// the workspace.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$`
	// +optional
	Runtime string `json:"runtime,omitempty"`

	// egress lists the host names the sandbox may reach through its proxy;
	// ".example.com" means the domain and its subdomains. Without egress the
	// sandbox has no network. IP literals, wildcards other than the leading
	// dot, ports, schemes, upper case and whitespace are rejected.
	// +kubebuilder:validation:MaxItems=64
	// +listType=set
	// +optional
	Egress []EgressHost `json:"egress,omitempty"`

	// timeoutSeconds is the default timeout of Runs in this sandbox.
	// +kubebuilder:default=600
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=86400
	// +optional
	TimeoutSeconds int32 `json:"timeoutSeconds,omitempty"`

	// resources are the CPU, memory and process limits of the sandbox.
	// +kubebuilder:default={}
	// +optional
	Resources SandboxResources `json:"resources,omitempty"`

	// user is the numeric "uid" or "uid:gid" the sandbox runs as (a bare uid
	// is uid:uid). uid 0 and gid 0 (root, in any spelling) are refused; names
	// are refused because an image could map them to root. The controller
	// also refuses gids on its --deny-gids list (the group of the engine's
	// socket, the host's privileged groups) and ids outside --allowed-uids and
	// --allowed-gids (reason UserNotAllowed). The gid is the only group the
	// sandbox's processes get: the image's /etc/group adds none. Unset, the
	// controller gives the sandbox a uid:gid of its own from its
	// --sandbox-id-range, unique on the engine, kept across recreations and
	// released with the sandbox, and owning the workspace; a user inside
	// that range cannot be named. Sandboxes that name the same user share
	// the limits the kernel counts per user.
	// +kubebuilder:validation:MaxLength=21
	// +kubebuilder:validation:XValidation:rule="self.matches('^0*[1-9][0-9]{0,9}(:0*[1-9][0-9]{0,9})?$')",message="user must be a numeric non-root uid or uid:gid (0, root and names are refused)"
	// +optional
	User string `json:"user,omitempty"`

	// env lists the environment variables given to each command the
	// controller executes in the sandbox (its Runs, builtins, kubectl afe
	// exec and shell), resolved for each. They are written into the
	// container's config only when the sandbox has its own command; an env
	// change then recreates the container, and otherwise reaches the next
	// command.
	// +kubebuilder:validation:MaxItems=256
	// +listType=map
	// +listMapKey=name
	// +optional
	Env []EnvVar `json:"env,omitempty"`

	// workspace is what is mounted at /workspace, the only mount.
	// +kubebuilder:default={type: Volume}
	// +optional
	Workspace WorkspaceSpec `json:"workspace,omitempty"`

	// lifecycle suspends the sandbox when idle and bounds its life.
	// +optional
	Lifecycle *SandboxLifecycle `json:"lifecycle,omitempty"`

	// poolRef names a SandboxPool of the same namespace whose ready member
	// the sandbox takes when it is created. A sandbox the pool cannot serve
	// (no ready member, a template that shapes another container, a Folder
	// workspace, a workspace from a snapshot) is created cold, and an Event
	// says why. Unset, a pool of the namespace whose template shapes the
	// very same container is used when one exists.
	// +optional
	PoolRef *PoolReference `json:"poolRef,omitempty"`
}

// EgressHost is a host name, or a domain with a leading dot.
// +kubebuilder:validation:MinLength=4
// +kubebuilder:validation:MaxLength=253
// +kubebuilder:validation:Pattern=`^\.?([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\.)+[a-z]([-a-z0-9]{0,61}[a-z0-9])?$`
type EgressHost string

// PoolReference names a SandboxPool in the namespace of the object that
// holds it.
type PoolReference struct {
	// name of the SandboxPool.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
}

// SandboxSpec declares one sandbox container and what it needs.
type SandboxSpec struct {
	// ticketRef names the owning Ticket, if any.
	// +optional
	TicketRef *TicketReference `json:"ticketRef,omitempty"`

	// scope names the lane of work of this sandbox within its ticket.
	// +kubebuilder:default=main
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	Scope string `json:"scope,omitempty"`

	// suspend stops the sandbox's container and proxy, keeping its
	// workspace and network, while true; false resumes it. Unlike a Paused
	// ticket, which leaves its sandboxes running as they are, a suspended
	// sandbox frees its memory and CPU. A ticket keeps this field as the
	// user set it.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	SandboxTemplateSpec `json:",inline"`
}

// SandboxStatus is the observed state of a Sandbox.
type SandboxStatus struct {
	// phase summarises the sandbox's state.
	// +optional
	Phase SandboxPhase `json:"phase,omitempty"`

	// runtime is the OCI runtime the sandbox's container was made with, as
	// the controller chose it (spec.runtime or its --default-runtime).
	// +optional
	Runtime string `json:"runtime,omitempty"`
	// pool is the SandboxPool the sandbox's container came from; empty when
	// it was created cold. A report: the controller finds a claimed
	// container by its name, its labels and its claim record on the engine,
	// never by this field.
	// +optional
	Pool string `json:"pool,omitempty"`
	// node is, in per-node mode, the node whose engine holds the sandbox's
	// container and workspace, as its manager last wrote it. When the
	// sandbox's ticket is moved (NodeDrained), the next node's manager
	// asks this node's manager for the workspace: that manager answers
	// only for a sandbox of this UID placed on the asking node.
	// +optional
	Node string `json:"node,omitempty"`
	// containerName is the Docker name of the sandbox container.
	// +optional
	ContainerName string `json:"containerName,omitempty"`
	// containerID is the Docker ID of the current sandbox container.
	// +optional
	ContainerID string `json:"containerID,omitempty"`
	// volumeName is the Docker volume of the workspace (Volume workspaces).
	// +optional
	VolumeName string `json:"volumeName,omitempty"`
	// networkName is the internal network of a sandbox with egress.
	// +optional
	NetworkName string `json:"networkName,omitempty"`
	// proxyName is the Docker name of the egress proxy container.
	// +optional
	ProxyName string `json:"proxyName,omitempty"`
	// proxyURL is the proxy address the sandbox's HTTP(S)_PROXY points at.
	// +optional
	ProxyURL string `json:"proxyURL,omitempty"`
	// recreations counts how often the container was recreated after a loss.
	// +optional
	Recreations int32 `json:"recreations,omitempty"`
	// lastLostTime is when the container was last found lost.
	// +optional
	LastLostTime *metav1.Time `json:"lastLostTime,omitempty"`
	// readyTime is when the sandbox last became Ready.
	// +optional
	ReadyTime *metav1.Time `json:"readyTime,omitempty"`
	// lastActivityTime is when a Run or a command in the container was last
	// seen in the sandbox (or it was resumed): the idle timeout counts from
	// it, across restarts of the controller. A report written by the
	// controller; a later value set by anyone else only delays this
	// sandbox's own suspension.
	// +optional
	LastActivityTime *metav1.Time `json:"lastActivityTime,omitempty"`
	// suspendedTime is when the sandbox was last suspended; empty while it
	// is not.
	// +optional
	SuspendedTime *metav1.Time `json:"suspendedTime,omitempty"`
	// observedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// snapshots are the snapshot volumes Snapshot Runs made of this
	// workspace, oldest first (the last 64).
	// +listType=map
	// +listMapKey=name
	// +optional
	Snapshots []SandboxSnapshot `json:"snapshots,omitempty"`
	// diskEnforcement says how resources.disk is enforced on this engine;
	// empty without a disk limit.
	// +optional
	DiskEnforcement DiskEnforcement `json:"diskEnforcement,omitempty"`
	// conditions: Ready, WorkspaceReady, EgressReady, ContainerReady.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// SandboxSnapshot is one snapshot volume of a sandbox's workspace.
type SandboxSnapshot struct {
	// name of the snapshot volume, afe-<key>-snap-<n>: the value for
	// workspace.fromSnapshot.
	Name string `json:"name"`
	// run is the Snapshot Run that made it.
	Run string `json:"run"`
	// time is when the copy was complete.
	Time metav1.Time `json:"time"`
}

// Sandbox is one hardened sandbox container with its workspace and, when it
// declares egress, its internal network and proxy.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=sbx,categories=afe
// +kubebuilder:printcolumn:name="Ticket",type=string,JSONPath=`.spec.ticketRef.name`
// +kubebuilder:printcolumn:name="Scope",type=string,JSONPath=`.spec.scope`
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.image`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Egress",type=string,JSONPath=`.spec.egress`
// +kubebuilder:printcolumn:name="Container",type=string,JSONPath=`.status.containerName`
// +kubebuilder:printcolumn:name="Runtime",type=string,JSONPath=`.status.runtime`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Sandbox struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec declares the sandbox.
	Spec SandboxSpec `json:"spec"`
	// status is the sandbox's observed state.
	// +optional
	Status SandboxStatus `json:"status,omitempty"`
}

// SandboxList is a list of Sandboxes.
// +kubebuilder:object:root=true
type SandboxList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Sandbox `json:"items"`
}

func init() {
	register(&Sandbox{}, &SandboxList{})
}

// Resource defaults, as the CRD applies them.
var (
	DefaultCPU      = resource.MustParse("1")
	DefaultMemory   = resource.MustParse("1Gi")
	DefaultFileSize = resource.MustParse("1Gi")
)

// CPUOrDefault is the CPU limit.
func (r SandboxResources) CPUOrDefault() resource.Quantity { return orDefault(r.CPU, DefaultCPU) }

// MemoryOrDefault is the memory limit.
func (r SandboxResources) MemoryOrDefault() resource.Quantity {
	return orDefault(r.Memory, DefaultMemory)
}

// FileSizeOrDefault is the file size limit.
func (r SandboxResources) FileSizeOrDefault() resource.Quantity {
	return orDefault(r.FileSize, DefaultFileSize)
}

// DefaultOpenFiles is the default of openFiles.
const DefaultOpenFiles = 4096

// OpenFilesOrDefault is the open files limit.
func (r SandboxResources) OpenFilesOrDefault() int64 {
	if r.OpenFiles == 0 {
		return DefaultOpenFiles
	}
	return r.OpenFiles
}

func orDefault(q *resource.Quantity, def resource.Quantity) resource.Quantity {
	if q == nil {
		return def
	}
	return *q
}
