package fast

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// The API server refuses a SandboxPool whose template could not be
// pooled, with a message saying why, one rule each; a poolable one, and a
// Sandbox naming a pool, are accepted as they are.
var _ = Describe("SandboxPool validation", func() {
	pool := func(ns, name string, edit func(*afev1.SandboxTemplateSpec)) *afev1.SandboxPool {
		p := &afev1.SandboxPool{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       afev1.SandboxPoolSpec{Replicas: 2, Template: newSandbox(ns, name).Spec.SandboxTemplateSpec},
		}
		if edit != nil {
			edit(&p.Spec.Template)
		}
		return p
	}

	DescribeTable("refuses a template that is never pooled",
		func(ctx context.Context, edit func(*afev1.SandboxTemplateSpec), message string) {
			ns := newNamespace(ctx)
			Expect(k8sClient.Create(ctx, pool(ns, "bad", edit))).To(MatchError(ContainSubstring(message)))
		},
		Entry("a Folder workspace", func(t *afev1.SandboxTemplateSpec) {
			t.Workspace = afev1.WorkspaceSpec{Type: afev1.WorkspaceFolder, HostPath: "/srv/ws/x"}
		}, "a Folder workspace is never pooled"),
		Entry("a workspace from a snapshot", func(t *afev1.SandboxTemplateSpec) {
			t.Workspace = afev1.WorkspaceSpec{Type: afev1.WorkspaceVolume, FromSnapshot: "afe-ns.x_snap-1"}
		}, "cannot set workspace.fromSnapshot"),
		Entry("a poolRef", func(t *afev1.SandboxTemplateSpec) {
			t.PoolRef = &afev1.PoolReference{Name: "other"}
		}, "cannot set poolRef"),
	)

	It("refuses negative replicas", func(ctx context.Context) {
		p := pool(newNamespace(ctx), "negative", nil)
		p.Spec.Replicas = -1
		Expect(k8sClient.Create(ctx, p)).To(MatchError(ContainSubstring("spec.replicas")))
	})

	It("accepts a Volume template, and a Sandbox naming the pool", func(ctx context.Context) {
		ns := newNamespace(ctx)
		p := pool(ns, "ok", nil)
		create(ctx, p)
		Expect(p.Spec.Template.Workspace.Type).To(Equal(afev1.WorkspaceVolume))
		sbx := newSandbox(ns, "claimant")
		sbx.Spec.PoolRef = &afev1.PoolReference{Name: p.Name}
		create(ctx, sbx)
	})
})
