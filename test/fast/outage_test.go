package fast

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/naming"
	"afe.dev/sandbox/test/fakeengine"
)

// While the engine is away nothing is judged lost and a new sandbox says
// why it waits; once it is back, what happened meanwhile is found (its
// events were missed) and set right.
var _ = Describe("Engine outage", Serial, func() {
	It("catches up on a loss it could not see, and on a sandbox made meanwhile", func(ctx context.Context) {
		ns := newNamespace(ctx)
		steady := newSandbox(ns, "steady")
		create(ctx, steady)
		quiet := newSandbox(ns, "quiet")
		create(ctx, quiet)
		steadyID := waitReady(ctx, steady).Status.ContainerID
		quietID := waitReady(ctx, quiet).Status.ContainerID

		By("taking the engine away")
		engine.SetUnavailable(true)
		DeferCleanup(func() { engine.SetUnavailable(false) })
		early := newSandbox(ns, "early")
		create(ctx, early)
		waitCondition(ctx, early, afev1.SandboxReadyCondition, "False", afev1.EngineUnavailableReason)
		// The container dies while no event can tell of it.
		Expect(engine.Exit(naming.Container(key(quiet)), 137, false)).To(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(getSandbox(ctx, quiet)(g).Status.Recreations).To(BeZero())
		}, "1s").Should(Succeed())

		By("bringing it back")
		engine.SetUnavailable(false)
		waitReady(ctx, early)
		Eventually(func(g Gomega) {
			got := getSandbox(ctx, quiet)(g)
			g.Expect(got.Status.Recreations).To(BeEquivalentTo(1))
			g.Expect(got.Status.ContainerID).NotTo(BeEmpty())
			g.Expect(got.Status.ContainerID).NotTo(Equal(quietID))
		}).Should(Succeed())
		waitReady(ctx, quiet)
		got := waitReady(ctx, steady)
		Expect(got.Status.ContainerID).To(Equal(steadyID), "an untouched sandbox keeps its container")
		Expect(got.Status.Recreations).To(BeZero())
	})

	It("executes a Run again whose exec the outage cut short", func(ctx context.Context) {
		ns := newNamespace(ctx)
		sbx := newSandbox(ns, "runs")
		create(ctx, sbx)
		waitReady(ctx, sbx)
		clear := engine.Fail(fakeengine.Fault{Op: fakeengine.OpExec, Target: naming.Container(key(sbx)), Err: docker.ErrUnavailable, Times: 1})
		DeferCleanup(clear)

		run := &afev1.Run{}
		run.Namespace, run.Name = ns, "cut"
		run.Spec.SandboxRef.Name = sbx.Name
		run.Spec.Command = []string{"true"}
		create(ctx, run)
		Eventually(func(g Gomega) {
			got := &afev1.Run{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(run), got)).To(Succeed())
			g.Expect(got.Status.Phase).To(Equal(afev1.RunCompleted))
			g.Expect(got.Status.Attempts).To(BeEquivalentTo(2))
			g.Expect(got.Status.OK).To(HaveValue(BeTrue()))
		}, 20*time.Second).Should(Succeed())
	})
})
