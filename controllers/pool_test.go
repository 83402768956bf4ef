package controllers

import (
	"context"
	"os/exec"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/naming"
	"afe.dev/sandbox/test/dockertest"
)

// testMaxPoolReplicas is the suite manager's --max-pool-replicas.
const testMaxPoolReplicas = 3

func newPool(ns, name string, replicas int32) *afev1.SandboxPool {
	return &afev1.SandboxPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: afev1.SandboxPoolSpec{Replicas: replicas, Template: afev1.SandboxTemplateSpec{
			Image: dockertest.TestImage,
			Resources: afev1.SandboxResources{
				CPU: ptr.To(resource.MustParse("500m")), Memory: ptr.To(resource.MustParse("128Mi")), Pids: 64,
			},
		}},
	}
}

// poolMembers lists the containers of the pool's members on the engine
// (claimed or not), by the labels the controller gives them.
func poolMembers(p *afev1.SandboxPool) []*dockertest.Inspected {
	out, err := exec.Command("docker", "ps", "-a", "--format", "{{.Names}}",
		"--filter", "label="+afev1.LabelController+"="+instance,
		"--filter", "label="+afev1.LabelNamespace+"="+p.Namespace,
		"--filter", "label="+afev1.LabelPool+"="+p.Name,
		"--filter", "label="+afev1.LabelRole+"="+afev1.RoleMember).Output()
	Expect(err).NotTo(HaveOccurred())
	var members []*dockertest.Inspected
	for _, name := range strings.Fields(string(out)) {
		if c, err := dockertest.Inspect(name); err == nil {
			members = append(members, c)
		}
	}
	return members
}

// waitPoolReady waits until the pool says it keeps n ready members, and
// returns it.
func waitPoolReady(ctx context.Context, p *afev1.SandboxPool, n int32) *afev1.SandboxPool {
	got := &afev1.SandboxPool{}
	Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
		g.Expect(got.Status.ReadyReplicas).To(Equal(n), "status: %+v", got.Status)
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, afev1.SandboxPoolReadyCondition)).To(BeTrue())
	}).Should(Succeed())
	return got
}

// runningMembers are the names of the pool's running members that carry
// its current UID.
func runningMembers(p *afev1.SandboxPool) []string {
	var names []string
	for _, m := range poolMembers(p) {
		if m.State.Running && m.Config.Labels[afev1.LabelPoolUID] == string(p.UID) {
			names = append(names, m.Name)
		}
	}
	return names
}

// updatePool changes the pool, retrying a conflict.
func updatePool(ctx context.Context, p *afev1.SandboxPool, change func(*afev1.SandboxPool)) {
	Eventually(func() error {
		cur := &afev1.SandboxPool{}
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(p), cur); err != nil {
			return err
		}
		change(cur)
		return k8sClient.Update(ctx, cur)
	}).Should(Succeed())
}

func deletePoolAndWaitGone(ctx context.Context, p *afev1.SandboxPool) {
	Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, p))).To(Succeed())
	Eventually(func() bool {
		return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), &afev1.SandboxPool{}))
	}).Should(BeTrue())
}

var _ = Describe("Warm pools: keeping the members", func() {
	var (
		ctx context.Context
		ns  string
	)
	BeforeEach(func() {
		ctx = context.Background()
		ns = newNamespace(ctx)
	})

	It("keeps its replicas as hardened members of their own host id with no tenant env, replaces one removed by hand, and removes them all with the pool", func() {
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pool-creds"},
			Data: map[string][]byte{"token": []byte("s3cr3t-pool")}}
		Expect(k8sClient.Create(ctx, secret)).To(Succeed())
		p := newPool(ns, "warm", 2)
		p.Spec.Template.Env = []afev1.EnvVar{{Name: "GREETING", Value: "hello"},
			{Name: "API_TOKEN", ValueFrom: &afev1.EnvVarSource{SecretKeyRef: &afev1.SecretKeySelector{Name: "pool-creds", Key: "token"}}}}
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		DeferCleanup(func() { deletePoolAndWaitGone(ctx, p) })
		got := waitPoolReady(ctx, p, 2)
		Expect(got.Status.Ready).To(Equal("2/2"))
		Expect(got.Finalizers).To(ContainElement(afev1.SandboxPoolFinalizer))
		p.UID = got.UID

		By("making each member as a sandbox's container, with the pool's labels and none of a Sandbox's")
		members := poolMembers(p)
		Expect(members).To(HaveLen(2))
		users := map[string]bool{}
		for _, m := range members {
			id, unclaimed := naming.MemberID(naming.Key(ns, p.Name), m.Name)
			Expect(unclaimed).To(BeTrue(), "named as an unclaimed member: %s", m.Name)
			Expect(id).To(HaveLen(naming.MemberIDLength))
			l := m.Config.Labels
			Expect(l).To(HaveKeyWithValue(afev1.LabelPoolUID, string(p.UID)))
			Expect(l).To(HaveKeyWithValue(afev1.LabelMemberName, m.Name))
			Expect(l).NotTo(HaveKey(afev1.LabelSandboxUID))
			Expect(l).NotTo(HaveKey(afev1.LabelSandbox))
			Expect(l[afev1.LabelSpecHash]).NotTo(BeEmpty())
			Expect(l[afev1.LabelUser]).To(Equal(m.Config.User), "a host id of its own, recorded")
			users[m.Config.User] = true
			Expect(m.HostConfig.CapDrop).To(ContainElement("ALL"))
			Expect(m.HostConfig.SecurityOpt).To(ContainElement("no-new-privileges:true"))
			Expect(m.HostConfig.NetworkMode).To(Equal("none"))
			Expect(*m.HostConfig.PidsLimit).To(BeEquivalentTo(64))
			Expect(m.Mounts).To(HaveLen(1))
			Expect(m.Mounts[0].Name).To(Equal(naming.MemberVolume(m.Name)))
			Expect(m.Mounts[0].Destination).To(Equal("/workspace"))
			Expect(strings.Join(m.Config.Env, "\n")).NotTo(Or(ContainSubstring("s3cr3t-pool"), ContainSubstring("GREETING")),
				"a member on the keep-alive holds no env of the template")
		}
		Expect(users).To(HaveLen(2), "each member has a host id of its own")

		By("replacing a member removed by hand")
		gone := members[0].Name
		Expect(exec.Command("docker", "rm", "-f", gone).Run()).To(Succeed())
		Eventually(func(g Gomega) {
			names := runningMembers(p)
			g.Expect(names).To(HaveLen(2))
			g.Expect(names).NotTo(ContainElement(gone))
		}).Should(Succeed())
		Eventually(func() ([]string, error) { return dockertest.Objects("afe.member-name=" + gone) }).Should(BeEmpty(),
			"the removed member's workspace volume goes with it")
		waitPoolReady(ctx, p, 2)

		By("removing every member and its volume with the pool")
		deletePoolAndWaitGone(ctx, p)
		Expect(dockertest.Objects(afev1.LabelPool + "=" + p.Name + "," + afev1.LabelNamespace + "=" + ns)).To(BeEmpty())
	})

	It("replaces its members when the template changes, keeps at most --max-pool-replicas, and lowers to a smaller replicas", func() {
		p := newPool(ns, "shapes", 2)
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		DeferCleanup(func() { deletePoolAndWaitGone(ctx, p) })
		p.UID = waitPoolReady(ctx, p, 2).UID
		before := runningMembers(p)

		By("replacing every member once the template changes")
		updatePool(ctx, p, func(cur *afev1.SandboxPool) { cur.Spec.Template.Resources.CPU = ptr.To(resource.MustParse("250m")) })
		Eventually(func(g Gomega) {
			members := poolMembers(p)
			g.Expect(members).To(HaveLen(2))
			for _, m := range members {
				g.Expect(before).NotTo(ContainElement(m.Name))
				g.Expect(m.HostConfig.NanoCpus).To(BeEquivalentTo(250_000_000))
			}
		}).Should(Succeed())
		waitPoolReady(ctx, p, 2)

		By("keeping --max-pool-replicas when replicas asks for more, and saying so")
		updatePool(ctx, p, func(cur *afev1.SandboxPool) { cur.Spec.Replicas = testMaxPoolReplicas + 2 })
		got := waitPoolReady(ctx, p, testMaxPoolReplicas)
		Expect(meta.FindStatusCondition(got.Status.Conditions, afev1.SandboxPoolReadyCondition).Reason).To(Equal(afev1.PoolReplicasBoundedReason))
		Consistently(func() int { return len(poolMembers(p)) }, "2s").Should(Equal(testMaxPoolReplicas))

		By("removing the surplus when replicas is lowered")
		updatePool(ctx, p, func(cur *afev1.SandboxPool) { cur.Spec.Replicas = 1 })
		Eventually(func() int { return len(poolMembers(p)) }).Should(Equal(1))
		waitPoolReady(ctx, p, 1)
	})

	It("makes no member of a template it cannot honour, and says why", func() {
		p := newPool(ns, "missing-runtime", 1)
		p.Spec.Template.Runtime = missingRuntime
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		DeferCleanup(func() { deletePoolAndWaitGone(ctx, p) })
		Eventually(func(g Gomega) {
			got := &afev1.SandboxPool{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
			c := meta.FindStatusCondition(got.Status.Conditions, afev1.SandboxPoolReadyCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(afev1.RuntimeUnavailableReason))
		}).Should(Succeed())
		Consistently(func() []*dockertest.Inspected { return poolMembers(p) }, "2s").Should(BeEmpty())
	})

	It("removes a member whose pool is gone, found by the sweep, and its volume; never another controller instance's", func() {
		key := naming.Key(ns, "ghost")
		planted := naming.Member(key, "00000000aa")
		labels := []string{afev1.LabelController + "=" + instance, afev1.LabelNamespace + "=" + ns,
			afev1.LabelPool + "=ghost", afev1.LabelPoolUID + "=no-such-uid", afev1.LabelMemberName + "=" + planted}
		run := func(name, role, controller string) {
			args := []string{"run", "-d", "--name", name, "--network", "none"}
			for _, l := range labels {
				switch {
				case strings.HasPrefix(l, afev1.LabelController+"="):
					l = afev1.LabelController + "=" + controller
				case strings.HasPrefix(l, afev1.LabelMemberName+"="):
					l = afev1.LabelMemberName + "=" + name
				}
				args = append(args, "--label", l)
			}
			args = append(args, "--label", afev1.LabelRole+"="+role, dockertest.TestImage, "sleep", "600")
			out, err := exec.Command("docker", args...).CombinedOutput()
			Expect(err).NotTo(HaveOccurred(), string(out))
			DeferCleanup(func() { _ = exec.Command("docker", "rm", "-f", name).Run() })
		}
		run(planted, afev1.RoleMember, instance)
		volume := naming.MemberVolume(planted)
		args := []string{"volume", "create"}
		for _, l := range append(labels, afev1.LabelRole+"="+afev1.RoleWorkspace) {
			args = append(args, "--label", l)
		}
		Expect(exec.Command("docker", append(args, volume)...).Run()).To(Succeed())
		DeferCleanup(func() { _ = exec.Command("docker", "volume", "rm", "-f", volume).Run() })
		other := naming.Member(key, "00000000bb")
		run(other, afev1.RoleMember, "another-instance")

		Eventually(func() ([]string, error) {
			return dockertest.Objects(afev1.LabelMemberName + "=" + planted + "," + afev1.LabelNamespace + "=" + ns)
		}).Should(BeEmpty())
		Consistently(func() error { _, err := dockertest.Inspect(other); return err }, "3s").Should(Succeed(),
			"a member of another controller instance is never touched")
	})
})
