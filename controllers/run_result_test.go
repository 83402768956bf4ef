package controllers

import (
	"context"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// The result (docs/threat-model.md): a JSON object nested 9,997
// deep, under the result line's 64 KiB. Stored as is, it broke the API
// server's watch and list of Runs in every namespace.
var _ = Describe("Run results past their bounds", func() {
	It("refuses a result nested 9,997 deep, and a Run in another namespace completes meanwhile", func() {
		ctx := context.Background()
		const depth = 9_997
		line := `{"a":` + strings.Repeat("[", depth-1) + "1" + strings.Repeat("]", depth-1) + "}"
		Expect(len(line)).To(BeNumerically("<", 64<<10), "the line is within the result line's bound")

		hostileNS, bystanderNS := newNamespace(ctx), newNamespace(ctx)
		hostile, bystander := newSandbox(hostileNS, "deep"), newSandbox(bystanderNS, "bystander")
		for _, s := range []*afev1.Sandbox{hostile, bystander} {
			Expect(k8sClient.Create(ctx, s)).To(Succeed())
			DeferCleanup(func() { deleteAndWaitGone(ctx, s) })
		}
		waitReady(ctx, hostile)
		waitReady(ctx, bystander)

		deep := newRun(hostileNS, "deep", hostile.Name)
		deep.Spec.Script = `echo '{"earlier":true}'; echo '` + line + `'; echo done`
		Expect(k8sClient.Create(ctx, deep)).To(Succeed())
		DeferCleanup(func() { _ = k8sClient.Delete(ctx, deep) })
		got := waitRunEnded(ctx, deep)

		By("completing a Run in another namespace after it, through the manager's watch of Runs")
		other := newRun(bystanderNS, "bystander", bystander.Name)
		other.Spec.Command = []string{"echo", `{"fine":1}`}
		other.Spec.TimeoutSeconds = ptr.To[int32](30)
		Expect(k8sClient.Create(ctx, other)).To(Succeed())
		DeferCleanup(func() { _ = k8sClient.Delete(ctx, other) })
		done := waitRunPhase(ctx, other, afev1.RunCompleted)
		Expect(result(done)).To(Equal(map[string]any{"fine": 1.0}))

		By("listing Runs of every namespace")
		list := &afev1.RunList{}
		Expect(k8sClient.List(ctx, list)).To(Succeed())

		By("ending the deep Run Completed, its result refused and said so")
		Expect(got.Status.Phase).To(Equal(afev1.RunCompleted))
		Expect(got.Status.OK).To(HaveValue(BeTrue()))
		Expect(got.Status.ExitCode).To(HaveValue(BeZero()))
		Expect(got.Status.Result).To(BeEmpty(), "an earlier object does not stand in for the refused one")
		cond := findCondition(got.Status.Conditions, afev1.RunCompletedCondition)
		Expect(cond).NotTo(BeNil())
		GinkgoWriter.Printf("condition: %s: %s\n", cond.Reason, cond.Message)
		Expect(cond.Reason).To(Equal(afev1.ResultRefusedReason))
		Expect(cond.Message).To(ContainSubstring("nests 9997 levels deep, more than 64"))
		Expect(got.Status.Output).To(HaveSuffix("done\n"))
	})
})
