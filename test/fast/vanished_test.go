package fast

import (
	"context"
	"errors"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/naming"
	"afe.dev/sandbox/test/fakeengine"
)

// A Sandbox can go with the finalizer the controller wrote and no reconcile
// of its deletion: the API server checks the finalizers when a delete
// begins, so a delete that began before the finalizer's write (a Sandbox
// served from a pool is Ready before it has one) removes it all the same.
// That race is not reached on demand; the state it leaves is: here the
// reconcile of the deletion is held at its first engine call while the
// finalizer goes by another hand, and the Sandbox is gone before any
// reconcile finishes with it.
var _ = Describe("A claimed Sandbox gone without a reconcile of its deletion", func() {
	It("has what it claimed removed by the reconcile that finds it gone", func(ctx context.Context) {
		ns := newNamespace(ctx)
		p := &afev1.SandboxPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "warm"},
			Spec: afev1.SandboxPoolSpec{Replicas: 1, Template: newSandbox(ns, "template").Spec.SandboxTemplateSpec}}
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
			g.Expect(p.Status.ReadyReplicas).To(BeEquivalentTo(1))
		}).Should(Succeed())
		sbx := newSandbox(ns, "claimant")
		sbx.Spec.PoolRef = &afev1.PoolReference{Name: p.Name}
		Expect(k8sClient.Create(ctx, sbx)).To(Succeed())
		waitReady(ctx, sbx)
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(sbx), sbx)).To(Succeed())
			g.Expect(sbx.Finalizers).To(ContainElement(afev1.SandboxFinalizer))
		}).Should(Succeed())
		claimed := map[string]string{afev1.LabelController: instance, afev1.LabelNamespace: ns, afev1.LabelRole: afev1.RoleClaim}
		Expect(engine.Objects(claimed)).To(ConsistOf("volume/" + naming.Claim(key(sbx))))

		By("holding the reconciles of its deletion at their first look at the claim, and taking its finalizer away")
		clear := engine.Fail(fakeengine.Fault{Op: fakeengine.OpInspectVolume, Target: naming.Claim(key(sbx)), Err: errors.New("held")})
		DeferCleanup(clear)
		Expect(k8sClient.Delete(ctx, sbx)).To(Succeed())
		base := sbx.DeepCopy()
		controllerutil.RemoveFinalizer(sbx, afev1.SandboxFinalizer)
		Expect(k8sClient.Patch(ctx, sbx, client.MergeFrom(base))).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(sbx), &afev1.Sandbox{}))
		}).Should(BeTrue())
		clear()

		By("removing the claimed member, its workspace and the record once the engine answers")
		Expect(k8sClient.Delete(ctx, p)).To(Succeed())
		Eventually(func() []string {
			return engine.Objects(map[string]string{afev1.LabelController: instance, afev1.LabelNamespace: ns})
		}).Should(BeEmpty())
	})
})
