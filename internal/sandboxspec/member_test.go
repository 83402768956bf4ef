package sandboxspec

import (
	"testing"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/naming"
)

func TestMemberIsASandboxContainerOfNoSandbox(t *testing.T) {
	m := MemberIdentity{Namespace: "ns", Pool: "p", PoolUID: "puid", Instance: "i", Name: naming.Member("ns.p", "0123456789")}
	spec := &afev1.SandboxTemplateSpec{Image: "img", Env: []afev1.EnvVar{{Name: "SECRET", Value: "v"}}}
	r := Resolved{Env: []string{"SECRET=v"}, User: AllocatedUser(70001)}
	c := Member(spec, m, r, "shapehash")
	sbx := &afev1.Sandbox{Spec: afev1.SandboxSpec{SandboxTemplateSpec: *spec}}
	r.Workspace = naming.MemberVolume(m.Name)
	cold := Container(sbx, Identity{Key: "x"}, r)
	if c.Name != m.Name || c.Mounts[0].Source != naming.MemberVolume(m.Name) {
		t.Fatalf("name %q, workspace %q: not the member's", c.Name, c.Mounts[0].Source)
	}
	if len(c.Env) != 0 {
		t.Fatalf("a member on the keep-alive holds env %v", c.Env)
	}
	if c.User != cold.User || c.NanoCPUs != cold.NanoCPUs || c.PidsLimit != cold.PidsLimit || c.Network != "none" ||
		len(c.CapDrop) != 1 || !c.NoNewPrivileges || !c.Init {
		t.Fatalf("the member is not hardened as a sandbox: %+v", c)
	}
	want := map[string]string{afev1.LabelNamespace: "ns", afev1.LabelController: "i", afev1.LabelPool: "p",
		afev1.LabelPoolUID: "puid", afev1.LabelMemberName: m.Name, afev1.LabelRole: afev1.RoleMember,
		afev1.LabelSpecHash: "shapehash", afev1.LabelUser: AllocatedUser(70001)}
	if len(c.Labels) != len(want) {
		t.Fatalf("labels %v, want %v", c.Labels, want)
	}
	for k, v := range want {
		if c.Labels[k] != v {
			t.Fatalf("label %s = %q, want %q", k, c.Labels[k], v)
		}
	}
	if c.Mounts[0].Labels[afev1.LabelRole] != afev1.RoleWorkspace || c.Mounts[0].Labels[afev1.LabelSandboxUID] != "" {
		t.Fatalf("workspace labels %v", c.Mounts[0].Labels)
	}

	spec.Command = []string{"serve"}
	if c := Member(spec, m, r, "h"); len(c.Env) != 1 || c.Env[0] != "SECRET=v" {
		t.Fatalf("a member of a template with its own command lacks its env: %v", c.Env)
	}
}
