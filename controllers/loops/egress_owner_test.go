package loops

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/naming"
	"afe.dev/sandbox/internal/sandboxspec"
)

func TestEgressOwner(t *testing.T) {
	sbx := &afev1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "box", UID: "uid-box"},
		Spec: afev1.SandboxSpec{TicketRef: &afev1.TicketReference{Name: "tk"}}}
	other := &afev1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "other", UID: "uid-other"}}
	id := sandboxspec.IdentityOf(sbx, "inst")
	proxyName := naming.Proxy(id.Key)
	own := id.Labels(afev1.RoleProxy)
	with := func(k, v string) map[string]string {
		l := map[string]string{}
		for key, val := range own {
			l[key] = val
		}
		if v == "" {
			delete(l, k)
		} else {
			l[k] = v
		}
		return l
	}
	get := func(ns, name string) *afev1.Sandbox {
		for _, s := range []*afev1.Sandbox{sbx, other} {
			if s.Namespace == ns && s.Name == name {
				return s
			}
		}
		return nil
	}
	member := map[string]string{afev1.LabelRole: afev1.RoleProxy, afev1.LabelController: "inst", afev1.LabelNamespace: "ns",
		afev1.LabelPoolUID: "uid-pool", afev1.LabelMemberName: "afe-ns.pool-m1"}
	binds := func(docker.Container) *afev1.Sandbox { return sbx }
	tests := map[string]struct {
		name   string
		labels map[string]string
		member func(docker.Container) *afev1.Sandbox
		want   bool
	}{
		"the sandbox's own proxy":              {name: proxyName, labels: own, want: true},
		"another instance's":                   {name: proxyName, labels: with(afev1.LabelController, "other"), want: false},
		"a sandbox container, not a proxy":     {name: proxyName, labels: with(afev1.LabelRole, afev1.RoleSandbox), want: false},
		"the UID of an earlier Sandbox":        {name: proxyName, labels: with(afev1.LabelSandboxUID, "uid-old"), want: false},
		"no UID":                               {name: proxyName, labels: with(afev1.LabelSandboxUID, ""), want: false},
		"a Sandbox that does not exist":        {name: proxyName, labels: with(afev1.LabelSandbox, "gone"), want: false},
		"labels of another Sandbox, this name": {name: proxyName, labels: sandboxspec.IdentityOf(other, "inst").Labels(afev1.RoleProxy), want: false},
		"the labels, another name":             {name: "afe-ns.box-x_proxy", labels: own, want: false},
		"an unclaimed member's proxy":          {name: naming.MemberProxy("afe-ns.pool-m1"), labels: member, member: func(docker.Container) *afev1.Sandbox { return nil }, want: false},
		"a claimed member's, bound (the seam)": {name: proxyName, labels: member, member: binds, want: true},
		"a member's, no binding function":      {name: proxyName, labels: member, want: false},
		"a bound member's, not yet renamed":    {name: naming.MemberProxy("afe-ns.pool-m1"), labels: member, member: binds, want: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := egressOwner(docker.Container{ID: "c1", Name: tc.name, Labels: tc.labels}, "inst", get, tc.member)
			if ok != tc.want {
				t.Fatalf("owned %v, want %v", ok, tc.want)
			}
			if ok && got != id {
				t.Fatalf("identity %+v, want %+v", got, id)
			}
		})
	}
}
