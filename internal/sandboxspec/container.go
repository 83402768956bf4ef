package sandboxspec

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/enginespec"
	"afe.dev/sandbox/internal/naming"
)

// WorkspacePath is where the workspace is mounted, the container's only mount.
const WorkspacePath = "/workspace"

// KeepAlive is the container's process when the spec has no command: it idles
// and exits at once on SIGTERM. It blocks reading its stdin, which the
// engine holds open and nobody writes (see enginespec.ContainerSpec.OpenStdin),
// so it needs nothing in the image but /bin/sh; should that stdin ever end,
// it sleeps instead.
var KeepAlive = []string{"/bin/sh", "-c", "trap 'exit 0' TERM INT; while :; do read -r _ || { sleep 3600 & wait $!; }; done"}

// Identity is who a sandbox's Docker objects belong to.
type Identity struct {
	Namespace string
	Name      string
	UID       string
	Ticket    string
	Scope     string
	Instance  string
	Key       string
}

// IdentityOf derives the identity of a sandbox's objects.
func IdentityOf(sbx *afev1.Sandbox, instance string) Identity {
	ticket := sbx.Name
	if sbx.Spec.TicketRef != nil && sbx.Spec.TicketRef.Name != "" {
		ticket = sbx.Spec.TicketRef.Name
	}
	scope := sbx.Spec.Scope
	if scope == "" {
		scope = "main"
	}
	return Identity{
		Namespace: sbx.Namespace,
		Name:      sbx.Name,
		UID:       string(sbx.UID),
		Ticket:    ticket,
		Scope:     scope,
		Instance:  instance,
		Key:       naming.Key(sbx.Namespace, sbx.Name),
	}
}

// Labels are the labels of the object of the given role.
func (id Identity) Labels(role string) map[string]string {
	return map[string]string{
		afev1.LabelTicket:     id.Ticket,
		afev1.LabelNamespace:  id.Namespace,
		afev1.LabelSandbox:    id.Name,
		afev1.LabelSandboxUID: id.UID,
		afev1.LabelScope:      id.Scope,
		afev1.LabelRole:       role,
		afev1.LabelController: id.Instance,
	}
}

// NameSelector selects, by labels, the objects in the role (any role when
// empty) of every Sandbox of this namespace and name that this instance
// made: this one's and those an earlier Sandbox of the name left. What is
// found is then checked one by one (OwnsAs, Stale).
func (id Identity) NameSelector(role string) map[string]string {
	sel := map[string]string{
		afev1.LabelController: id.Instance,
		afev1.LabelNamespace:  id.Namespace,
		afev1.LabelSandbox:    id.Name,
	}
	if role != "" {
		sel[afev1.LabelRole] = role
	}
	return sel
}

// Owns is true when labels mark an object of this sandbox and instance.
func (id Identity) Owns(labels map[string]string) bool { return id.Differs(labels, "") == "" }

// OwnsAs is true when labels mark an object of this sandbox and instance in
// the given role: what is verified on an inspected object before acting on
// it.
func (id Identity) OwnsAs(labels map[string]string, role string) bool {
	return id.Differs(labels, role) == ""
}

// Differs is the first label in which labels differ from those of this
// sandbox's objects in the role (any role when empty): its UID, namespace,
// name and controller instance, then the role. Empty when they mark this
// sandbox's object. The one check of an object's identity, wherever an
// object is looked up to be acted on (the reconcilers, the access API).
func (id Identity) Differs(labels map[string]string, role string) string {
	want := id.Labels(role)
	keys := []string{afev1.LabelSandboxUID, afev1.LabelNamespace, afev1.LabelSandbox, afev1.LabelController, afev1.LabelRole}
	if role == "" {
		keys = keys[:len(keys)-1]
	}
	for _, k := range keys {
		if got, ok := labels[k]; !ok || got != want[k] || got == "" {
			return k
		}
	}
	return ""
}

// Stale is true when labels mark an object of this instance, in the given
// role, made for an earlier Sandbox of this namespace and name: one that no
// longer exists, since a namespace and name belong to one Sandbox at a
// time. Such an object is an orphan and can go at once. An object of another
// instance, or without our labels, is never stale.
func (id Identity) Stale(labels map[string]string, role string) bool {
	uid := labels[afev1.LabelSandboxUID]
	return uid != "" && uid != id.UID &&
		labels[afev1.LabelController] == id.Instance &&
		labels[afev1.LabelRole] == role &&
		labels[afev1.LabelNamespace] == id.Namespace &&
		labels[afev1.LabelSandbox] == id.Name
}

// Resolved are the inputs of the container that the controller looked up.
type Resolved struct {
	// Env are the declared variables, resolved, as KEY=VALUE in order.
	// They enter the container's config only when the sandbox has its own
	// command (ContainerEnv); every command the controller executes for
	// the tenant gets them as its exec's environment.
	Env []string
	// Workspace is the volume name, or the resolved host folder.
	Workspace string
	// Network is "none", or the sandbox's internal network.
	Network string
	// ProxyEnv are the proxy variables of a sandbox with egress.
	ProxyEnv []string
	// ProxyAddress is the address of the sandbox's proxy on its network
	// (a sandbox with egress): the container's /etc/hosts names it
	// ProxyAlias, so that the sandbox reaches its proxy without the
	// engine's DNS, which a runtime with its own network stack (gVisor's)
	// does not reach.
	ProxyAddress string
	// Address is the sandbox's fixed address on its network
	// (SandboxAddress), or "" for the engine's choice.
	Address string
	// DiskEnforcement is how resources.disk is enforced on the engine, when
	// the spec sets it.
	DiskEnforcement afev1.DiskEnforcement
	// User is the uid:gid allocated to a sandbox without spec.user
	// (AllocatedUser), recorded in the container's afe.uid label.
	User string
	// Runtime is the engine's runtime the sandbox runs under (RuntimeOf);
	// a zero one is the engine's default.
	Runtime enginespec.Runtime
}

// UserOf is the uid and gid the container of the sandbox runs as: spec.user,
// or else the allocated one.
func UserOf(spec *afev1.SandboxTemplateSpec, r Resolved) (uid, gid int, err error) {
	if spec.User != "" {
		return ParseUser(spec.User)
	}
	if r.User == "" {
		return 0, 0, fmt.Errorf("the sandbox names no user and none was allocated")
	}
	return ParseUser(r.User)
}

// Container is the hardened sandbox container: all capabilities dropped,
// no-new-privileges, a non-root user, CPU, memory (swap off) and pids limits,
// an init process, the workspace as the only mount, no env of the tenant's
// but for a sandbox with its own command (ContainerEnv), and no network
// unless it has egress. Its labels carry the spec hash, which therefore
// covers the declared env only when the container holds it.
func Container(sbx *afev1.Sandbox, id Identity, r Resolved) enginespec.ContainerSpec {
	spec := sbx.Spec.SandboxTemplateSpec
	uid, gid, _ := UserOf(&spec, r)
	mount := enginespec.Mount{Type: enginespec.MountVolume, Source: r.Workspace, Target: WorkspacePath}
	if spec.Workspace.Type == afev1.WorkspaceFolder {
		mount.Type = enginespec.MountBind
		if spec.User == "" {
			// An allocated id: the folder is made its own, as a volume is
			// (the folder itself, not what it holds).
			mount.Owner = &enginespec.Owner{UID: uid, GID: gid}
		}
	} else {
		mount.Owner = &enginespec.Owner{UID: uid, GID: gid}
		mount.Labels = id.Labels(afev1.RoleWorkspace)
	}
	cmd, openStdin := spec.Command, false
	if len(cmd) == 0 {
		cmd, openStdin = KeepAlive, true
	}
	network := r.Network
	if network == "" {
		network = "none"
	}
	c := enginespec.ContainerSpec{
		Name:  naming.Container(id.Key),
		Image: spec.Image,
		// The entrypoint is emptied so that the command is exactly what the
		// spec says, whatever the image's entrypoint.
		Entrypoint:      []string{},
		Command:         cmd,
		User:            formatUser(uid, gid),
		WorkingDir:      WorkspacePath,
		Env:             ContainerEnv(&spec, r),
		Mounts:          []enginespec.Mount{mount},
		Network:         network,
		IPv4Address:     r.Address,
		DNS:             dnsFor(network),
		ExtraHosts:      proxyHost(r.ProxyAddress),
		NanoCPUs:        cpuOf(spec.Resources) * 1_000_000,
		MemoryBytes:     memoryOf(spec.Resources),
		PidsLimit:       spec.Resources.Pids,
		Ulimits:         ulimits(spec.Resources),
		CapDrop:         []string{"ALL"},
		NoNewPrivileges: true,
		Init:            true,
		OpenStdin:       openStdin,
		Log:             SandboxLog(spec.Resources),
		ImageVolumes:    imageVolumes(id),
	}
	limitDisk(&c, spec.Resources, r.DiskEnforcement)
	applyRuntime(&c, r.Runtime)
	labels := id.Labels(afev1.RoleSandbox)
	labels[afev1.LabelSpecHash] = Hash(c)
	if spec.User == "" && r.User != "" {
		labels[afev1.LabelUser] = r.User
	}
	c.Labels = labels
	return c
}

// proxyHost is the /etc/hosts line naming the proxy at addr, none for "".
func proxyHost(addr string) []string {
	if addr == "" {
		return nil
	}
	return []string{ProxyAlias + ":" + addr}
}

// ContainerEnv is the env written into the container's config: the proxy
// variables of a sandbox with egress (its proxy's address on its own
// network: no secret, and what every process of the sandbox needs to get
// out), and the declared env only when the sandbox has its own command,
// which must see it from its start. A sandbox idling on the keep-alive
// holds none of its declared env: its values, Secrets' included, reach the
// commands the controller executes in it (ExecEnv), and never appear in
// its config (docker inspect).
func ContainerEnv(spec *afev1.SandboxTemplateSpec, r Resolved) []string {
	// Never nil: the hash of a spec without env is the one it always was.
	env := []string{}
	if len(spec.Command) > 0 {
		env = append(env, r.Env...)
	}
	return append(env, r.ProxyEnv...)
}

// ExecEnv is the environment of a command the controller executes in the
// sandbox for its tenant (a Run's steps, a builtin's own, an exec of the
// access API): the declared env, resolved, then the command's own
// variables (a builtin's), which win over a declared one of the same name.
// The controller's own commands (process lists, kills, probes, copies) are
// given no env of the tenant's.
func ExecEnv(declared, own []string) []string {
	if len(declared) == 0 && len(own) == 0 {
		return nil
	}
	mine := make(map[string]bool, len(own))
	for _, kv := range own {
		name, _, _ := strings.Cut(kv, "=")
		mine[name] = true
	}
	env := make([]string, 0, len(declared)+len(own))
	for _, kv := range declared {
		if name, _, _ := strings.Cut(kv, "="); !mine[name] {
			env = append(env, kv)
		}
	}
	return append(env, own...)
}

// Hash is the hash of everything in a container spec but its labels.
func Hash(c enginespec.ContainerSpec) string {
	c.Labels = nil
	if c.Runtime == DefaultRuntime {
		// runc is what every container ran under before runtimes were
		// chosen: naming it changes nothing.
		c.Runtime = ""
	}
	// Labels of the mounts too: they follow the identity, not the spec.
	c.Mounts = append([]enginespec.Mount(nil), c.Mounts...)
	for i := range c.Mounts {
		c.Mounts[i].Labels = nil
	}
	b, _ := json.Marshal(c)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:20]
}

// Volume is the workspace volume of a Volume workspace.
func Volume(id Identity) enginespec.VolumeSpec {
	return enginespec.VolumeSpec{Name: naming.Volume(id.Key), Labels: id.Labels(afev1.RoleWorkspace)}
}

// ulimits are the file size and open file limits (defaults for objects
// written before the fields existed).
func ulimits(r afev1.SandboxResources) []enginespec.Ulimit {
	var out []enginespec.Ulimit
	fs := r.FileSizeOrDefault()
	if v := fs.Value(); v > 0 {
		out = append(out, enginespec.Ulimit{Name: "fsize", Soft: v, Hard: v})
	}
	n := r.OpenFilesOrDefault()
	out = append(out, enginespec.Ulimit{Name: "nofile", Soft: n, Hard: n})
	if r.CPUSeconds > 0 {
		// SIGXCPU at the soft limit, SIGKILL a second later.
		out = append(out, enginespec.Ulimit{Name: "cpu", Soft: r.CPUSeconds, Hard: r.CPUSeconds + 1})
	}
	return out
}

func cpuOf(r afev1.SandboxResources) int64 {
	q := r.CPUOrDefault()
	return q.MilliValue()
}

func memoryOf(r afev1.SandboxResources) int64 {
	q := r.MemoryOrDefault()
	return q.Value()
}

// dnsFor: a sandbox on its internal network gets NoDNS.
func dnsFor(network string) []string {
	if network == "none" {
		return nil
	}
	return NoDNS
}

func formatUser(uid, gid int) string { return fmt.Sprintf("%d:%d", uid, gid) }

// limitDisk applies resources.disk: no file larger than the limit, and the
// writable layer limited by the engine or, where it cannot, a read-only
// root filesystem with a tmpfs at /tmp of at most the limit and half the
// memory (tmpfs is memory, charged to the container). Without a limit the
// spec is left as it is.
func limitDisk(c *enginespec.ContainerSpec, r afev1.SandboxResources, how afev1.DiskEnforcement) {
	if r.Disk == nil {
		return
	}
	disk := r.Disk.Value()
	for i := range c.Ulimits {
		if c.Ulimits[i].Name == "fsize" && c.Ulimits[i].Hard > disk {
			c.Ulimits[i].Soft, c.Ulimits[i].Hard = disk, disk
		}
	}
	if how == afev1.DiskStorageQuota {
		c.StorageSizeBytes = disk
		return
	}
	c.ReadOnlyRootfs = true
	c.Tmpfs = map[string]string{"/tmp": fmt.Sprintf("rw,nosuid,nodev,mode=1777,size=%d", TmpSize(r))}
}

// TmpSize is the size of the /tmp tmpfs of a sandbox with a disk limit
// enforced by a read-only root: the limit, at most half the memory.
func TmpSize(r afev1.SandboxResources) int64 {
	return min(r.Disk.Value(), memoryOf(r)/2)
}
