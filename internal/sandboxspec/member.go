package sandboxspec

import (
	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/enginespec"
	"afe.dev/sandbox/internal/naming"
)

// MemberIdentity is who a warm pool member's Docker objects belong to: its
// pool (namespace, name and UID), the controller instance, and its own
// name, naming.Member(pool key, a random ID). It names no Sandbox: the
// Sandbox that claims the member is bound to it by a claim record
// (package pool), since labels never change.
type MemberIdentity struct {
	Namespace string
	Pool      string
	PoolUID   string
	Instance  string
	// Name is the member container's name in its pool, the stem of its
	// volume, network and proxy names.
	Name string
}

// Labels are the labels of the member's object in the role: the pool's,
// the member's name, and no Sandbox's.
func (m MemberIdentity) Labels(role string) map[string]string {
	return map[string]string{
		afev1.LabelNamespace:  m.Namespace,
		afev1.LabelController: m.Instance,
		afev1.LabelPool:       m.Pool,
		afev1.LabelPoolUID:    m.PoolUID,
		afev1.LabelMemberName: m.Name,
		afev1.LabelRole:       role,
	}
}

// PoolSelector selects the objects of every member this instance made for
// the pools of this namespace and name, in the role (any when empty).
func (m MemberIdentity) PoolSelector(role string) map[string]string {
	sel := map[string]string{
		afev1.LabelController: m.Instance,
		afev1.LabelNamespace:  m.Namespace,
		afev1.LabelPool:       m.Pool,
	}
	if role != "" {
		sel[afev1.LabelRole] = role
	}
	return sel
}

// Member is the container of a pool member: the container a Sandbox of the
// pool's template gets (Container), as that of no Sandbox. It is named and
// labelled as the member's, mounts the member's workspace volume, and
// carries shapeHash (the pool's pool.Shape hash) as its afe.spec-hash: a
// claimed member is judged for drift by its claimant's shape, which names
// no identity. Like any sandbox on the keep-alive, it holds no env of the
// tenant's unless the template has its own command; r.Workspace is
// ignored.
func Member(spec *afev1.SandboxTemplateSpec, m MemberIdentity, r Resolved, shapeHash string) enginespec.ContainerSpec {
	sbx := &afev1.Sandbox{Spec: afev1.SandboxSpec{SandboxTemplateSpec: *spec}}
	r.Workspace = naming.MemberVolume(m.Name)
	c := Container(sbx, Identity{Key: "member"}, r)
	c.Name = m.Name
	c.Mounts[0].Labels = m.Labels(afev1.RoleWorkspace)
	c.ImageVolumes = &enginespec.ImageVolumes{
		Name:   func(path string) string { return naming.MemberImageVolume(m.Name, path) },
		Labels: m.Labels(afev1.RoleImageVolume),
	}
	labels := m.Labels(afev1.RoleMember)
	labels[afev1.LabelSpecHash] = shapeHash
	if spec.User == "" && r.User != "" {
		labels[afev1.LabelUser] = r.User
	}
	c.Labels = labels
	return c
}

// MemberVolume is the member's workspace volume.
func MemberVolume(m MemberIdentity) enginespec.VolumeSpec {
	return enginespec.VolumeSpec{Name: naming.MemberVolume(m.Name), Labels: m.Labels(afev1.RoleWorkspace)}
}
