package fast

import (
	"context"
	"errors"
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/naming"
	"afe.dev/sandbox/test/fakeengine"
)

// A claim cut short at any of its steps converges: the controller keeps no
// memory of a claim between reconciles (each step is read back from the
// engine), so a step that fails ends the reconcile exactly as a crash
// there would, and the next one goes on from what the engine shows.
var errNotFound = fmt.Errorf("no such container: %w", docker.ErrNotFound)

var _ = Describe("A claim cut short", func() {
	DescribeTable("converges with one member claimed once, nothing leaked",
		func(ctx context.Context, fault func(sbx *afev1.Sandbox, member string) fakeengine.Fault) {
			ns := newNamespace(ctx)
			tmpl := newSandbox(ns, "template").Spec.SandboxTemplateSpec
			p := &afev1.SandboxPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "warm"},
				Spec: afev1.SandboxPoolSpec{Replicas: 1, Template: tmpl}}
			Expect(k8sClient.Create(ctx, p)).To(Succeed())
			Eventually(func(g Gomega) {
				g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
				g.Expect(p.Status.ReadyReplicas).To(BeEquivalentTo(1))
			}).Should(Succeed())
			members := engine.Objects(map[string]string{afev1.LabelNamespace: ns, afev1.LabelRole: afev1.RoleMember})
			Expect(members).To(HaveLen(1))
			member := strings.TrimPrefix(members[0], "container/")

			sbx := newSandbox(ns, "claimant")
			sbx.Spec.PoolRef = &afev1.PoolReference{Name: p.Name}
			clear := engine.Fail(fault(sbx, member))
			DeferCleanup(clear)
			Expect(k8sClient.Create(ctx, sbx)).To(Succeed())
			got := waitReady(ctx, sbx)
			Expect(engine.Faults()).To(BeZero(), "the claim was cut short where the entry says")
			Expect(got.Status.Pool).To(Equal(p.Name))
			c := container(ctx, naming.Container(key(sbx)))
			Expect(c).NotTo(BeNil())
			Expect(c.Labels).To(HaveKeyWithValue(afev1.LabelMemberName, member), "the member that was ready")
			Expect(container(ctx, member)).To(BeNil(), "no container bears its pool name any more")
			Expect(engine.Objects(map[string]string{afev1.LabelNamespace: ns, afev1.LabelRole: afev1.RoleClaim})).
				To(ConsistOf("volume/" + naming.Claim(key(sbx))))

			By("removing the claimed member, its workspace and the record with the Sandbox, and the pool's with it")
			Expect(k8sClient.Delete(ctx, sbx)).To(Succeed())
			Expect(k8sClient.Delete(ctx, p)).To(Succeed())
			Eventually(func() []string {
				return engine.Objects(map[string]string{afev1.LabelController: instance, afev1.LabelNamespace: ns})
			}).Should(BeEmpty())
		},
		Entry("at the record's write", func(sbx *afev1.Sandbox, _ string) fakeengine.Fault {
			return fakeengine.Fault{Op: fakeengine.OpEnsureVolume, Target: naming.Claim(key(sbx)), Err: errors.New("cut short"), Times: 1}
		}),
		Entry("at the rename", func(*afev1.Sandbox, string) fakeengine.Fault {
			return fakeengine.Fault{Op: fakeengine.OpRenameContainer, Err: errors.New("cut short"), Times: 1}
		}),
		Entry("after the rename, before it is seen bound", func(sbx *afev1.Sandbox, _ string) fakeengine.Fault {
			// The claim's reads of its record: none, none (a member
			// chosen), written (rename), renamed (bound): the fourth fails.
			return fakeengine.Fault{Op: fakeengine.OpInspectVolume, Target: naming.Claim(key(sbx)), Err: errors.New("cut short"), Skip: 3, Times: 1}
		}),
		Entry("at the workspace of its member, once bound", func(_ *afev1.Sandbox, member string) fakeengine.Fault {
			return fakeengine.Fault{Op: fakeengine.OpInspectVolume, Target: naming.MemberVolume(member), Err: errors.New("cut short"), Times: 1}
		}),
		Entry("at the start of the member's claim, a rename that finds it gone", func(*afev1.Sandbox, string) fakeengine.Fault {
			// The engine's answer to a rename whose container another
			// claimant took: the record is dropped and the member chosen again.
			return fakeengine.Fault{Op: fakeengine.OpRenameContainer, Err: errNotFound, Times: 1}
		}),
	)
})
