// Package pool holds the pure decisions of warm pools: what shapes a
// container (Shape), which pool and member serve a Sandbox (Choose), the
// next step of a claim (NextClaimStep), and how fast a pool is refilled
// (Refill). It reads the engine only through what its callers pass.
package pool

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/enginespec"
	"afe.dev/sandbox/internal/sandboxspec"
)

// Shape is the key of what shapes a sandbox's container for a template:
// two templates of equal Shapes give a sandbox the very same container
// (sandboxspec.Container) and spec-hash, whatever else they say (egress
// hosts, timeouts, env without a command: those are bound at the claim).
// It is comparable with ==; Differs says in words what differs.
type Shape struct {
	// Image is spec.image.
	Image string
	// Command is spec.command, encoded; empty for the keep-alive.
	Command string
	// Env is a hash of the resolved env when the template has a command
	// (the env is then in the container); empty without one (the env is
	// given to each exec).
	Env string
	// User is spec.user; empty is one shape: the allocated uid:gid, which
	// a member carries (afe.uid) and its claimant takes.
	User string
	// Resources are the limits, with their defaults.
	Resources string
	// Disk is resources.disk in bytes; empty when unset (and then left out
	// of the Hash, which stays what it was before disk limits were pooled).
	// Only a pool of the same disk limit serves a sandbox.
	Disk string `json:",omitempty"`
	// DiskEnforcement is how the disk limit is enforced on the engine
	// (controllers/disklimit's Probe) when there is one: a member made
	// under a storage quota is not one made with a read-only root.
	DiskEnforcement afev1.DiskEnforcement `json:",omitempty"`
	// Runtime is the runtime the container runs under (spec.runtime, or
	// the controller's default).
	Runtime string
	// Lifecycle is spec.lifecycle, encoded; empty when unset.
	Lifecycle string
	// Workspace is the workspace's type.
	Workspace afev1.WorkspaceType
	// Egress is whether egress is declared (a member then has its network
	// and proxy); the hosts are installed at the claim.
	Egress bool
	// Container is sandboxspec.Hash of the container the template gives a
	// sandbox of a fixed identity: whatever sandboxspec puts in a
	// container that the fields above miss makes it differ too.
	Container string
}

// Shape inputs fixed for every template, so that only the template counts.
var (
	canonicalID = sandboxspec.Identity{Namespace: "pool", Name: "shape", UID: "shape", Ticket: "shape",
		Scope: "main", Instance: "pool", Key: "pool.shape"}
	// canonicalUser stands for the allocated uid:gid of a template
	// without spec.user.
	canonicalUser = sandboxspec.AllocatedUser(1)
)

// ShapeOf is the Shape of a template, under the controller's default
// runtime (opts.DefaultRuntime). env is the template's env resolved as
// KEY=VALUE (what sandboxspec.Resolved.Env holds); it counts only when the
// template has a command. disk is how the engine enforces a disk limit
// (controllers/disklimit's Probe); it counts only when the template has one.
func ShapeOf(spec *afev1.SandboxTemplateSpec, opts sandboxspec.Options, env []string, disk afev1.DiskEnforcement) Shape {
	s := Shape{
		Image:     spec.Image,
		User:      spec.User,
		Resources: resources(spec.Resources),
		Runtime:   sandboxspec.RuntimeOf(spec, opts),
		Workspace: spec.Workspace.Type,
		Egress:    len(spec.Egress) > 0,
	}
	if s.Workspace == "" {
		s.Workspace = afev1.WorkspaceVolume
	}
	if len(spec.Command) > 0 {
		s.Command = encode(spec.Command)
		if len(env) > 0 {
			s.Env = hash(encode(env))[:20]
		}
	} else {
		env = nil
	}
	if spec.Lifecycle != nil {
		s.Lifecycle = encode(spec.Lifecycle)
	}
	if spec.Resources.Disk != nil {
		s.Disk = fmt.Sprint(spec.Resources.Disk.Value())
		s.DiskEnforcement = disk
		if s.DiskEnforcement == "" {
			s.DiskEnforcement = afev1.DiskStorageQuota
		}
	}
	s.Container = containerHash(spec, s.Runtime, env, s.DiskEnforcement)
	return s
}

// Hash is a short digest of the whole shape: what a member carries as its
// afe.spec-hash label, so that a member made for an earlier template (or
// earlier env values) is told apart, and a claimed member is judged for
// drift by its Sandbox's shape, which names no identity.
func (s Shape) Hash() string { return hash(encode(s))[:20] }

// Differs says in words what differs first between the shape a pool
// offers (s) and the one a sandbox needs (want), in the order a reader
// looks for it; empty when they are equal.
func (s Shape) Differs(want Shape) string {
	switch {
	case s.Image != want.Image:
		return "image differs"
	case s.Command != want.Command:
		return "command differs"
	case s.Env != want.Env:
		return "env differs (a sandbox with a command has its env in the container)"
	case s.User != want.User:
		return "user differs"
	case s.Disk != want.Disk:
		return "resources.disk differs"
	case s.Resources != want.Resources:
		return "resources differ"
	case s.Runtime != want.Runtime:
		return "runtime differs"
	case s.DiskEnforcement != want.DiskEnforcement:
		return "the disk limit's enforcement differs"
	case s.Lifecycle != want.Lifecycle:
		return "lifecycle differs"
	case s.Workspace != want.Workspace:
		return "workspace type differs"
	case s.Egress != want.Egress:
		if want.Egress {
			return "the sandbox declares egress and the pool does not"
		}
		return "the pool declares egress and the sandbox does not"
	case s.Container != want.Container:
		return "the container differs"
	}
	return ""
}

// containerHash is sandboxspec.Hash of the container the template gives
// the canonical sandbox, with the inputs resolved alike for every
// template: the names of its volume and network, the proxy's variables,
// the allocated user; and the disk enforcement, the engine's (Shape's).
func containerHash(spec *afev1.SandboxTemplateSpec, runtime string, env []string, disk afev1.DiskEnforcement) string {
	sbx := &afev1.Sandbox{Spec: afev1.SandboxSpec{SandboxTemplateSpec: *spec}}
	sbx.Spec.Egress = nil // only whether there is egress counts
	r := sandboxspec.Resolved{
		Env:       env,
		Workspace: "workspace",
		User:      canonicalUser,
		Runtime:   enginespec.Runtime{Name: runtime},
	}
	if len(spec.Egress) > 0 {
		r.Network, r.ProxyEnv = "network", sandboxspec.ProxyEnvFor()
	}
	if spec.Resources.Disk != nil {
		r.DiskEnforcement = disk
	}
	return sandboxspec.Hash(sandboxspec.Container(sbx, canonicalID, r))
}

// resources are the limits with their defaults, in one string.
func resources(r afev1.SandboxResources) string {
	cpu, mem, fsize := r.CPUOrDefault(), r.MemoryOrDefault(), r.FileSizeOrDefault()
	disk := int64(-1)
	if r.Disk != nil {
		disk = r.Disk.Value()
	}
	return fmt.Sprintf("cpu=%dm memory=%d pids=%d fileSize=%d disk=%d openFiles=%d cpuSeconds=%d",
		cpu.MilliValue(), mem.Value(), r.Pids, fsize.Value(), disk, r.OpenFilesOrDefault(), r.CPUSeconds)
}

func encode(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
