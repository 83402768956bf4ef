package fast

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/naming"
	"afe.dev/sandbox/test/fakeengine"
)

// An image that cannot be pulled is reported and retried; it never costs a
// running container of an earlier spec.
var _ = Describe("Pull failures", func() {
	var ns string
	BeforeEach(func(ctx context.Context) { ns = newNamespace(ctx) })

	It("keeps the running container when the new spec's image cannot be pulled", func(ctx context.Context) {
		const next = "afe/busybox:next"
		DeferCleanup(func() { engine.RemoveImage(next) })
		sbx := newSandbox(ns, "drift")
		create(ctx, sbx)
		before := waitReady(ctx, sbx).Status.ContainerID

		Eventually(func(g Gomega) {
			cur := getSandbox(ctx, sbx)(g)
			cur.Spec.Image = next
			g.Expect(k8sClient.Update(ctx, cur)).To(Succeed())
		}).Should(Succeed())
		waitCondition(ctx, sbx, afev1.ContainerReadyCondition, "False", afev1.ImagePullFailedReason)
		c := container(ctx, naming.Container(key(sbx)))
		Expect(c).NotTo(BeNil())
		Expect(c.ID).To(Equal(before))
		Expect(c.Running).To(BeTrue())
		Expect(c.Image).To(Equal(testImage))

		By("the image arriving")
		engine.AddImage(next)
		Eventually(func(g Gomega) {
			c := container(ctx, naming.Container(key(sbx)))
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Image).To(Equal(next))
		}).Should(Succeed())
		got := waitReady(ctx, sbx)
		Expect(got.Status.ContainerID).NotTo(Equal(before))
		Expect(got.Status.Recreations).To(BeZero(), "drift is not a loss")
	})

	It("reports a proxy image the engine fails to pull, and makes the proxy once it can", func(ctx context.Context) {
		clear := engine.Fail(fakeengine.Fault{Op: fakeengine.OpEnsureImage, Target: proxyImage,
			Err: &docker.PullError{Ref: proxyImage, Reason: "toomanyrequests: pull rate limit"}})
		DeferCleanup(clear)
		sbx := newSandbox(ns, "proxy-pull", "example.com")
		create(ctx, sbx)
		got := waitCondition(ctx, sbx, afev1.EgressReadyCondition, "False", afev1.ImagePullFailedReason)
		Expect(conditionStatus(got, afev1.SandboxReadyCondition)).To(BeEquivalentTo("False"))
		Expect(container(ctx, naming.Proxy(key(sbx)))).To(BeNil())
		Expect(container(ctx, naming.Container(key(sbx)))).To(BeNil(), "no sandbox container before its proxy")

		clear()
		waitReady(ctx, sbx)
		Expect(container(ctx, naming.Proxy(key(sbx)))).NotTo(BeNil())
	})
})
