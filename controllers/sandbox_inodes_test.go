package controllers

import (
	"context"
	"os/exec"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/test/dockertest"
)

// Issue 48 made 500,000 empty files in a sandbox limited to 64Mi, which
// its bytes never noticed. The bound resources.disk 64Mi gives (65536,
// internal/sandboxspec TestInodeBound) is lowered here with
// resources.inodes so that a few thousand files show the same in seconds.
var _ = Describe("Sandbox inode bound", func() {
	It("stops a sandbox whose workspace holds more inodes than its bound, whatever its bytes, and keeps it stopped", func() {
		ctx := context.Background()
		sbx := newSandbox(newNamespace(ctx), "inodes")
		sbx.Spec.Resources.Disk = ptr.To(resource.MustParse("64Mi"))
		sbx.Spec.Resources.Inodes = ptr.To[int64](2000)
		Expect(k8sClient.Create(ctx, sbx)).To(Succeed())
		DeferCleanup(func() { deleteAndWaitGone(ctx, sbx) })
		got := waitReady(ctx, sbx)
		name := got.Status.ContainerName

		By("making 3,000 empty files: no byte, 3,000 inodes of the engine's filesystem")
		// Detached: the sandbox may be stopped before the command ends.
		Expect(exec.Command("docker", "exec", "-d", name, "sh", "-c", "mkdir /workspace/d && cd /workspace/d && seq 3000 | xargs touch").Run()).To(Succeed())
		cond := waitCondition(ctx, sbx, afev1.ContainerReadyCondition, metav1.ConditionFalse, afev1.DiskQuotaExceededReason)
		Expect(cond.Message).To(ContainSubstring("over the sandbox's bound of 2000 inodes"))
		Expect(cond.Message).To(ContainSubstring("raise resources.inodes"))
		Eventually(func() error { _, err := dockertest.Inspect(name); return err }).Should(HaveOccurred(), "the container is gone")
		Expect(getSandbox(ctx, sbx)(Default).Status.Phase).To(Equal(afev1.SandboxFailed))

		By("keeping it stopped, the condition unchanged (measured every second meanwhile)")
		// The message names the inodes measured, which may change from
		// one measurement to the next: its stable parts are compared.
		Consistently(func(g Gomega) {
			_, err := dockertest.Inspect(name)
			g.Expect(err).To(HaveOccurred(), "not started again")
			c := meta.FindStatusCondition(getSandbox(ctx, sbx)(g).Status.Conditions, afev1.ContainerReadyCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(afev1.DiskQuotaExceededReason))
			g.Expect(c.Message).To(ContainSubstring("over the sandbox's bound of 2000 inodes"))
			g.Expect(c.Message).To(ContainSubstring("raise resources.inodes"))
			g.Expect(c.LastTransitionTime).To(Equal(cond.LastTransitionTime))
		}, 4*time.Second, 500*time.Millisecond).Should(Succeed())

		By("starting it again, with its workspace, once the bound is raised")
		Eventually(func(g Gomega) {
			cur := getSandbox(ctx, sbx)(g)
			cur.Spec.Resources.Inodes = ptr.To[int64](10000)
			g.Expect(k8sClient.Update(ctx, cur)).To(Succeed())
		}).Should(Succeed())
		got = waitReady(ctx, sbx)
		Expect(inSandbox(got.Status.ContainerName, "test $(ls /workspace/d | wc -l) -gt 2000")).Error().NotTo(HaveOccurred())
	})

	It("counts the writable layer of a sandbox without resources.disk", func() {
		ctx := context.Background()
		sbx := newSandbox(newNamespace(ctx), "layer-inodes")
		sbx.Spec.Resources.Inodes = ptr.To[int64](2000)
		Expect(k8sClient.Create(ctx, sbx)).To(Succeed())
		DeferCleanup(func() { deleteAndWaitGone(ctx, sbx) })
		got := waitReady(ctx, sbx)
		name := got.Status.ContainerName

		// Detached: the sandbox may be stopped before the command ends.
		Expect(exec.Command("docker", "exec", "-d", "-u", "0", name, "sh", "-c", "mkdir /layer && cd /layer && seq 3000 | xargs touch").Run()).To(Succeed())
		Eventually(func() []string { return eventReasons(ctx, sbx.Namespace, sbx) }).Should(ContainElement(afev1.DiskQuotaExceededReason))
		By("making it again with a fresh root: the files went with the container's layer")
		Eventually(func(g Gomega) {
			cur := getSandbox(ctx, sbx)(g)
			g.Expect(cur.Status.Phase).To(Equal(afev1.SandboxReady))
			g.Expect(cur.Status.ContainerID).NotTo(Equal(got.Status.ContainerID))
		}).Should(Succeed())
		Expect(inSandbox(name, "test ! -e /layer")).Error().NotTo(HaveOccurred())
	})
})
