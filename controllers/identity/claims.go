package identity

import (
	"context"
	"errors"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/naming"
	"afe.dev/sandbox/internal/pool"
	"afe.dev/sandbox/internal/sandboxspec"
)

// A Sandbox served from a warm pool runs on a member whose labels were
// written before the Sandbox existed and name none: it is the Sandbox's
// only by what the controller wrote on the engine at the claim, the claim
// record (the volume naming.Claim(key), whose labels name the Sandbox's
// UID and the member's ID), and by the Sandbox's name it bears since
// (internal/pool: claim.go). Every lookup below checks those, never a
// status field.

// ObjectInspector inspects containers and volumes.
type ObjectInspector interface {
	ContainerInspector
	VolumeInspector
}

// NetworkInspector inspects a network by name.
type NetworkInspector interface {
	// InspectNetwork returns docker.ErrNotFound when the network does not
	// exist.
	InspectNetwork(ctx context.Context, name string) (*docker.Network, error)
}

// ClaimRecord is the labels of the sandbox's claim record when it has one
// that names it; nil otherwise.
func ClaimRecord(ctx context.Context, engine VolumeInspector, id sandboxspec.Identity) (map[string]string, error) {
	v, err := engine.InspectVolume(ctx, naming.Claim(id.Key))
	if errors.Is(err, docker.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !pool.OwnsRecord(id, v.Labels) {
		return nil, nil
	}
	return v.Labels, nil
}

// ContainerDiffers is the first label in which c differs from the
// sandbox's object in the role (sandboxspec.Identity.Differs); empty when
// it is the sandbox's, or, in the sandbox and proxy roles, its claimed
// member's container (pool.Binds) or proxy (pool.BindsProxy).
func ContainerDiffers(ctx context.Context, engine VolumeInspector, id sandboxspec.Identity, c *docker.Container, role string) (string, error) {
	k := id.Differs(c.Labels, role)
	if k == "" || !claimable(role, c.Labels) {
		return k, nil
	}
	record, err := ClaimRecord(ctx, engine, id)
	if err != nil {
		return k, err
	}
	if role == afev1.RoleSandbox && pool.Binds(id, record, c) || role == afev1.RoleProxy && pool.BindsProxy(id, record, c) {
		return "", nil
	}
	return k, nil
}

// claimable is true when a container of the labels may be a pool member's
// object that a Sandbox claimed in the role: its container, or its proxy.
func claimable(role string, labels map[string]string) bool {
	switch role {
	case afev1.RoleSandbox:
		return labels[afev1.LabelRole] == afev1.RoleMember
	case afev1.RoleProxy:
		return labels[afev1.LabelRole] == afev1.RoleProxy && labels[afev1.LabelPoolUID] != ""
	}
	return false
}

// ClaimedNetwork is the internal network of the sandbox's claimed member,
// when it has a record and the network carries the member's labels;
// docker.ErrNotFound otherwise. The engine cannot rename a network: it
// keeps the member's name (naming.MemberNetwork).
func ClaimedNetwork(ctx context.Context, engine NetworkInspector, id sandboxspec.Identity, record map[string]string) (*docker.Network, error) {
	if record == nil || !pool.OwnsRecord(id, record) {
		return nil, docker.ErrNotFound
	}
	n, err := engine.InspectNetwork(ctx, naming.MemberNetwork(record[afev1.LabelMemberName]))
	if err != nil {
		return nil, err
	}
	if !pool.MemberObjectOf(id, record, n.Labels, afev1.RoleNetwork) {
		return nil, docker.ErrNotFound
	}
	return n, nil
}

// memberWorkspace is the workspace volume of the sandbox's claimed member,
// when it has a record and the volume carries the member's labels.
func memberWorkspace(ctx context.Context, engine VolumeInspector, id sandboxspec.Identity) (*docker.Volume, error) {
	record, err := ClaimRecord(ctx, engine, id)
	if err != nil || record == nil {
		return nil, errors.Join(err, docker.ErrNotFound)
	}
	v, err := engine.InspectVolume(ctx, naming.MemberVolume(record[afev1.LabelMemberName]))
	if err != nil {
		return nil, err
	}
	if !pool.MemberVolumeOf(id, record, v.Labels) {
		return nil, docker.ErrNotFound
	}
	return v, nil
}
