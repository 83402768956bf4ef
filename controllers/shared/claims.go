package shared

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
// it is the sandbox's, or, in the sandbox role, its claimed member.
func ContainerDiffers(ctx context.Context, engine VolumeInspector, id sandboxspec.Identity, c *docker.Container, role string) (string, error) {
	k := id.Differs(c.Labels, role)
	if k == "" || role != afev1.RoleSandbox || c.Labels[afev1.LabelRole] != afev1.RoleMember {
		return k, nil
	}
	record, err := ClaimRecord(ctx, engine, id)
	if err != nil {
		return k, err
	}
	if pool.Binds(id, record, c) {
		return "", nil
	}
	return k, nil
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
