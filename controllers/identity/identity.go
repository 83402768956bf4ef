// Package identity finds the Docker objects of a Kubernetes object by its
// identity (namespace, name and UID) and verifies them: the sandbox's
// container and workspace, or its claimed pool member's (claims.go), the
// objects a status names (StatusNamesForeign), and the removal of every
// object carrying labels. It names the engine methods each lookup asks
// for (engine.go).
package identity

import (
	"context"
	"errors"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/naming"
	"afe.dev/sandbox/internal/sandboxspec"
)

// Every action on a Docker object starts from the identity of the Kubernetes
// object it serves (namespace, name and UID): the object's name is derived
// from it (internal/naming), the object is inspected, its labels are
// verified (sandboxspec.Identity.Differs: afe.sandbox-uid, afe.namespace,
// afe.sandbox, afe.controller, afe.role), and the action then
// names the object by the ID the inspection returned. Nothing in a status is
// ever used to name an object: any user who may write a status could point
// it at another tenant's.

// SandboxContainer is the running container of the sandbox, or nil when it
// has none that carries its labels (or is its claimed member).
func SandboxContainer(ctx context.Context, engine ObjectInspector, id sandboxspec.Identity) (*docker.Container, error) {
	c, err := OwnedContainer(ctx, engine, id, naming.Container(id.Key), afev1.RoleSandbox)
	if c == nil || !c.Running {
		return nil, IgnoreEngineNotFound(err)
	}
	return c, nil
}

// OwnedContainer inspects the named container and verifies its labels: it
// is the sandbox's, in the role unless role is empty, or, in the sandbox
// role, the pool member the sandbox claimed (claims.go). It returns
// docker.ErrNotFound when there is no container of the name, and nil
// without an error when the container is another object's.
func OwnedContainer(ctx context.Context, engine ObjectInspector, id sandboxspec.Identity, name, role string) (*docker.Container, error) {
	c, err := engine.InspectContainer(ctx, name)
	if err != nil {
		return nil, err
	}
	if k, err := ContainerDiffers(ctx, engine, id, c, role); k != "" || err != nil {
		return nil, err
	}
	return c, nil
}

// IgnoreEngineNotFound is err, or nil when it says the object does not exist.
func IgnoreEngineNotFound(err error) error {
	if errors.Is(err, docker.ErrNotFound) {
		return nil
	}
	return err
}

// WorkspaceVolume is the sandbox's workspace volume, under its current or
// its legacy name, when one carries its labels, or else its claimed
// member's; ErrNotFound otherwise.
func WorkspaceVolume(ctx context.Context, engine VolumeInspector, id sandboxspec.Identity) (*docker.Volume, error) {
	for _, name := range []string{naming.Volume(id.Key), naming.LegacyVolume(id.Key)} {
		v, err := engine.InspectVolume(ctx, name)
		if errors.Is(err, docker.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if id.OwnsAs(v.Labels, afev1.RoleWorkspace) {
			return v, nil
		}
	}
	return memberWorkspace(ctx, engine, id)
}
