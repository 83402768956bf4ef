package controllers

import (
	"context"
	"os/exec"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/naming"
	"afe.dev/sandbox/test/dockertest"
)

// Serial, as "Sandbox disk limit": the engine runs one disk usage
// measurement at a time.
var _ = Describe("Warm pools: disk limits", Serial, func() {
	var (
		ctx context.Context
		ns  string
	)
	BeforeEach(func() {
		ctx = context.Background()
		ns = newNamespace(ctx)
	})

	It("serves a disk-limited Sandbox warm, meters its member through the claim record, and stops and keeps a member written past its limit", func() {
		engine, err := docker.New("")
		Expect(err).NotTo(HaveOccurred())
		quota, err := engine.StorageQuota(ctx)
		Expect(err).NotTo(HaveOccurred())
		p := newPool(ns, "disk", 1)
		p.Spec.Template.Resources.Disk = ptr.To(resource.MustParse("16Mi"))
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		DeferCleanup(func() { deletePoolAndWaitGone(ctx, p) })
		p.UID = waitPoolReady(ctx, p, 1).UID
		// The one member alone, running and made: a refill may have
		// started another, which the pool removes as beyond its replicas,
		// and a member being made has its chown helper beside it.
		var member *dockertest.Inspected
		Eventually(func(g Gomega) {
			members := poolMembers(p)
			g.Expect(members).To(HaveLen(1))
			g.Expect(members[0].State.Running).To(BeTrue())
			member = members[0]
		}).WithTimeout(time.Minute).Should(Succeed())

		By("making the member with the disk limit's enforcement, and no chown helper left beside it")
		if quota {
			Expect(member.HostConfig.ReadonlyRootfs).To(BeFalse())
		} else {
			Expect(member.HostConfig.ReadonlyRootfs).To(BeTrue())
			Expect(member.HostConfig.Tmpfs).To(HaveKeyWithValue("/tmp", ContainSubstring("size="+strconv.Itoa(16<<20))))
		}
		Expect(dockertest.Inspect(docker.ChownHelperName(member.Name))).Error().To(HaveOccurred())

		By("serving a Sandbox of the same limit from the member")
		sbx := poolSandbox(ns, "claimant", p.Name)
		sbx.Spec.Resources.Disk = ptr.To(resource.MustParse("16Mi"))
		Expect(k8sClient.Create(ctx, sbx)).To(Succeed())
		DeferCleanup(func() { deleteAndWaitGone(ctx, sbx) })
		ready := waitReady(ctx, sbx)
		key := naming.Key(ns, sbx.Name)
		name := naming.Container(key)
		Expect(ready.Status.Pool).To(Equal(p.Name))
		Expect(ready.Status.ContainerID).To(Equal(member.ID))
		Expect(ready.Status.DiskEnforcement).NotTo(BeEmpty())
		Expect(volumeExists(naming.Claim(key))).To(BeTrue())
		Expect(volumeExists(naming.Volume(key))).To(BeFalse(), "no cold workspace was made")

		By("measuring what the member's workspace holds as the Sandbox's")
		Expect(inSandbox(name, "dd if=/dev/zero of=/workspace/first bs=1M count=4 2>/dev/null")).Error().NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			g.Expect(servedUsage(ctx, g, ready).Usage.WorkspaceBytes).To(BeNumerically(">=", 4<<20))
		}, "30s").Should(Succeed())

		By("stopping the member, not removing it, when a workload writes past the limit")
		Expect(exec.Command("docker", "exec", "-d", name, "sh", "-c",
			`i=0; while [ $i -lt 64 ]; do dd if=/dev/zero of=/workspace/f$i bs=1M count=4 2>/dev/null; i=$((i+1)); sleep 0.2; done`).Run()).To(Succeed())
		waitCondition(ctx, sbx, afev1.ContainerReadyCondition, metav1.ConditionFalse, afev1.DiskQuotaExceededReason)
		Eventually(func(g Gomega) {
			c, err := dockertest.Inspect(name)
			g.Expect(err).NotTo(HaveOccurred(), "the member is kept")
			g.Expect(c.ID).To(Equal(member.ID))
			g.Expect(c.State.Running).To(BeFalse())
		}).Should(Succeed())
		Eventually(func() []string { return eventReasons(ctx, ns, sbx) }).Should(ContainElement(afev1.DiskQuotaExceededReason))

		By("keeping it stopped and claimed: no loss, no other member, no cold container")
		Consistently(func(g Gomega) {
			c, err := dockertest.Inspect(name)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(c.ID).To(Equal(member.ID))
			g.Expect(c.State.Running).To(BeFalse(), "not started again")
			g.Expect(volumeExists(naming.Claim(key))).To(BeTrue())
			g.Expect(volumeExists(naming.MemberVolume(member.Name))).To(BeTrue(), "the workspace is kept")
			got := getSandbox(ctx, sbx)(g)
			g.Expect(got.Status.Recreations).To(BeZero())
			c2 := meta.FindStatusCondition(got.Status.Conditions, afev1.ContainerReadyCondition)
			g.Expect(c2.Reason).To(Equal(afev1.DiskQuotaExceededReason))
		}, 5*time.Second, 500*time.Millisecond).Should(Succeed())
		used := workspaceSize(ctx, engine, naming.MemberVolume(member.Name))
		Expect(used).To(BeNumerically(">", 15<<20))
		Expect(used).To(BeNumerically("<", 256<<20), "stopped within a few seconds of writing")

		By("starting the same member again, with its workspace, once the limit is raised")
		Eventually(func(g Gomega) {
			cur := getSandbox(ctx, sbx)(g)
			cur.Spec.Resources.Disk = ptr.To(resource.MustParse("2Gi"))
			g.Expect(k8sClient.Update(ctx, cur)).To(Succeed())
		}).Should(Succeed())
		got := waitReady(ctx, sbx)
		Expect(got.Status.ContainerID).To(Equal(member.ID))
		Expect(inSandbox(name, "test -e /workspace/first")).Error().NotTo(HaveOccurred())

		By("leaving nothing behind once the Sandbox and the pool are gone")
		deleteAndWaitGone(ctx, sbx)
		Expect(exec.Command("docker", "inspect", member.ID).Run()).NotTo(Succeed())
		Expect(volumeExists(naming.MemberVolume(member.Name))).To(BeFalse())
		Expect(volumeExists(naming.Claim(key))).To(BeFalse())
		Expect(dockertest.Objects(afev1.LabelSandboxUID + "=" + string(ready.UID))).To(BeEmpty())
		deletePoolAndWaitGone(ctx, p)
		Eventually(func() ([]string, error) {
			return dockertest.Objects(afev1.LabelPool + "=" + p.Name + "," + afev1.LabelNamespace + "=" + ns)
		}).Should(BeEmpty())
	})

	It("makes no member of a disk-limited template with its own command, and says why", func() {
		p := newPool(ns, "disk-command", 1)
		p.Spec.Template.Resources.Disk = ptr.To(resource.MustParse("16Mi"))
		p.Spec.Template.Command = []string{"sleep", "1d"}
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		DeferCleanup(func() { deletePoolAndWaitGone(ctx, p) })
		Eventually(func(g Gomega) {
			got := &afev1.SandboxPool{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
			c := meta.FindStatusCondition(got.Status.Conditions, afev1.SandboxPoolReadyCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(afev1.InvalidSpecReason))
			g.Expect(c.Message).To(ContainSubstring("its own command"))
		}).Should(Succeed())
		Consistently(func() []*dockertest.Inspected { return poolMembers(p) }, "2s").Should(BeEmpty())
	})
})
