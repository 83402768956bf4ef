package controllers

import (
	"context"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/test/dockertest"
)

var _ = Describe("Sandbox runtime", func() {
	var ctx context.Context
	var ns string
	BeforeEach(func() {
		ctx = context.Background()
		ns = newNamespace(ctx)
	})

	// expectNothing waits for the reason and checks that nothing of the
	// sandbox exists in Docker, for a while.
	expectNothing := func(sbx *afev1.Sandbox, reason string, messageParts ...string) {
		c := waitCondition(ctx, sbx, afev1.ContainerReadyCondition, metav1.ConditionFalse, reason)
		for _, part := range messageParts {
			Expect(c.Message).To(ContainSubstring(part))
		}
		label := uidLabel(sbx)
		Consistently(func() ([]string, error) { return dockertest.Objects(label) }, "2s").Should(BeEmpty())
	}

	It("refuses a runtime not on --runtimes and creates nothing", func() {
		sbx := newSandbox(ns, "kata")
		sbx.Spec.Runtime = "kata"
		sbx.Spec.Egress = []afev1.EgressHost{"allowed.test"} // nor a network or proxy
		Expect(k8sClient.Create(ctx, sbx)).To(Succeed())
		expectNothing(sbx, afev1.RuntimeNotAllowedReason, `"kata"`, "--runtimes")
		Expect(getSandbox(ctx, sbx)(Default).Status.Phase).To(Equal(afev1.SandboxFailed))
		deleteAndWaitGone(ctx, sbx)
	})

	It("waits, creating nothing, while the engine lacks an allowed runtime", func() {
		sbx := newSandbox(ns, "missing")
		sbx.Spec.Runtime = missingRuntime
		Expect(k8sClient.Create(ctx, sbx)).To(Succeed())
		expectNothing(sbx, afev1.RuntimeUnavailableReason, `"`+missingRuntime+`"`, "--runtimes", "retrying")
		got := getSandbox(ctx, sbx)(Default)
		Expect(meta.IsStatusConditionTrue(got.Status.Conditions, afev1.SandboxReadyCondition)).To(BeFalse())
		Expect(got.Status.Phase).NotTo(Equal(afev1.SandboxFailed), "it waits")

		By("running once it names a runtime the engine has")
		got.Spec.Runtime = dockertest.Runtimes()[0]
		Expect(k8sClient.Update(ctx, got)).To(Succeed())
		ready := waitReady(ctx, sbx)
		Expect(ready.Status.Runtime).To(Equal(dockertest.Runtimes()[0]))
		deleteAndWaitGone(ctx, sbx)
	})

	It("refuses a name that is no runtime's at admission", func() {
		for _, bad := range []string{"Run SC", "../runsc", "-runsc", strings.Repeat("r", 64)} {
			sbx := newSandbox(ns, "bad")
			sbx.Spec.Runtime = bad
			Expect(k8sClient.Create(ctx, sbx)).NotTo(Succeed(), "runtime %q", bad)
		}
	})

	It("runs under the default runtime, and recreates the container under a new runtime keeping the workspace", func() {
		runtimes := dockertest.Runtimes()
		sbx := newSandbox(ns, "switch")
		Expect(k8sClient.Create(ctx, sbx)).To(Succeed())
		got := waitReady(ctx, sbx)
		Expect(got.Status.Runtime).To(Equal("runc"), "the suite's --default-runtime")
		Expect(engineRuntime(got.Status.ContainerName)).To(Equal("runc"))
		_, err := inSandbox(got.Status.ContainerName, "echo kept > /workspace/mark")
		Expect(err).NotTo(HaveOccurred())
		for _, rt := range append(runtimes[1:], runtimes[0]) {
			if rt == got.Status.Runtime {
				continue
			}
			By("switching to " + rt)
			before := got.Status.ContainerID
			got.Spec.Runtime = rt
			Expect(k8sClient.Update(ctx, got)).To(Succeed())
			Eventually(func(g Gomega) {
				got = getSandbox(ctx, sbx)(g)
				g.Expect(got.Status.ContainerID).NotTo(Equal(before))
				g.Expect(got.Status.Runtime).To(Equal(rt))
				g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, afev1.SandboxReadyCondition)).To(BeTrue())
			}).Should(Succeed())
			Expect(engineRuntime(got.Status.ContainerName)).To(Equal(rt))
			out, err := inSandbox(got.Status.ContainerName, "cat /workspace/mark")
			Expect(err).NotTo(HaveOccurred())
			Expect(out).To(Equal("kept"))
		}
		deleteAndWaitGone(ctx, sbx)
	})
})
