package controllers

import (
	"context"
	"fmt"
	"net"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/naming"
	"afe.dev/sandbox/test/dockertest"
)

var _ = Describe("Warm pools: egress", func() {
	var (
		ctx context.Context
		ns  string
	)
	BeforeEach(func() {
		ctx = context.Background()
		ns = newNamespace(ctx)
	})

	It("keeps members with a network and a proxy admitting nothing, and gives each claimant only its own allowlist, in place", func() {
		p := newPool(ns, "egress", 2)
		p.Spec.Template.Egress = []afev1.EgressHost{"allowed.test"}
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		DeferCleanup(func() { deletePoolAndWaitGone(ctx, p) })
		p.UID = waitPoolReady(ctx, p, 2).UID
		members := poolMembers(p)
		Expect(members).To(HaveLen(2))

		By("giving each member its internal network and a hardened proxy that admits nothing before a claim")
		for _, m := range members {
			Expect(m.HostConfig.NetworkMode).To(Equal(naming.MemberNetwork(m.Name)))
			Expect(dockertest.NetworkInternal(naming.MemberNetwork(m.Name))).To(BeTrue())
			proxy, err := dockertest.Inspect(naming.MemberProxy(m.Name))
			Expect(err).NotTo(HaveOccurred())
			Expect(proxy.State.Running).To(BeTrue())
			Expect(proxy.Config.Labels).To(HaveKeyWithValue(afev1.LabelPoolUID, string(p.UID)))
			Expect(proxy.Config.Labels).To(HaveKeyWithValue(afev1.LabelMemberName, m.Name))
			Expect(proxy.Config.Labels).NotTo(HaveKey(afev1.LabelSandboxUID))
			Expect(proxy.HostConfig.CapDrop).To(Equal([]string{"ALL"}))
			Expect(proxy.HostConfig.ReadonlyRootfs).To(BeTrue())
			Expect(proxy.NetworkSettings.Networks).To(HaveKey(egressNetwork))
			out, err := fetch(m.Name, "http://allowed.test/", true)
			Expect(err).To(HaveOccurred(), "an unclaimed member's proxy admits nothing: %s", out)
			Expect(out).To(ContainSubstring("403"))
		}

		By("serving two Sandboxes of other allowlists from the members")
		// The Sandboxes' creation times are kept to the second: the
		// requests above are before the second they are created in.
		time.Sleep(1100 * time.Millisecond)
		a := poolSandbox(ns, "a", p.Name)
		a.Spec.Egress = []afev1.EgressHost{"allowed.test"}
		b := poolSandbox(ns, "b", p.Name)
		b.Spec.Egress = []afev1.EgressHost{"other.allowed.test"}
		t0 := time.Now()
		Expect(k8sClient.Create(ctx, a)).To(Succeed())
		DeferCleanup(func() { deleteAndWaitGone(ctx, a) })
		readyA := waitReady(ctx, a)
		GinkgoWriter.Printf("a sandbox with egress from a pool: creation to Ready %s\n", time.Since(t0))
		Expect(k8sClient.Create(ctx, b)).To(Succeed())
		DeferCleanup(func() { deleteAndWaitGone(ctx, b) })
		readyB := waitReady(ctx, b)
		names := map[string]string{}
		for _, got := range []*afev1.Sandbox{readyA, readyB} {
			key := naming.Key(ns, got.Name)
			Expect(got.Status.Pool).To(Equal(p.Name))
			member, err := dockertest.Inspect(got.Status.ContainerName)
			Expect(err).NotTo(HaveOccurred())
			memberName := member.Config.Labels[afev1.LabelMemberName]
			Expect(got.Status.NetworkName).To(Equal(naming.MemberNetwork(memberName)))
			Expect(got.Status.ProxyName).To(Equal(naming.Proxy(key)))
			proxy, err := dockertest.Inspect(naming.Proxy(key))
			Expect(err).NotTo(HaveOccurred())
			Expect(proxy.Config.Labels).To(HaveKeyWithValue(afev1.LabelMemberName, memberName), "the member's own proxy, renamed")
			Expect(volumeExists(naming.Claim(key))).To(BeTrue())
			egress := meta.FindStatusCondition(got.Status.Conditions, afev1.EgressReadyCondition)
			Expect(egress.Status).To(BeEquivalentTo("True"))
			Expect(egress.Message).To(MatchRegexp(`\(allowlist [0-9a-f]+\)`))
			names[got.Name] = got.Status.ContainerName
		}
		Expect(readyA.Status.NetworkName).NotTo(Equal(readyB.Status.NetworkName))

		By("reaching only its own allowlist")
		Expect(fetch(names["a"], "http://allowed.test/", true)).To(Equal("hello-from-test-web"))
		expectRefused(func() (string, error) { return fetch(names["a"], "http://other.allowed.test/", true) })
		expectRefused(func() (string, error) { return fetch(names["a"], "http://denied.test/", true) })
		Expect(fetch(names["b"], "http://other.allowed.test/", true)).To(Equal("hello-from-test-web"))
		expectRefused(func() (string, error) { return fetch(names["b"], "http://allowed.test/", true) })

		By("recording the claimed proxies' decisions under their Sandbox, each only its own")
		Eventually(func(g Gomega) {
			var hosts []string
			for _, r := range egressOf(ctx, ns, "a") {
				g.Expect(r.SandboxUID).To(Equal(string(readyA.UID)))
				hosts = append(hosts, r.Host+" "+r.Decision)
			}
			g.Expect(hosts).To(ContainElements("allowed.test Allowed", "other.allowed.test Denied", "denied.test Denied"))
			g.Expect(hosts).NotTo(ContainElement(HavePrefix("allowed.test Denied")), "the unclaimed member's denial is nobody's")
		}, "20s").Should(Succeed())

		By("reaching neither the server nor the other sandbox nor the host directly, nor through the proxy")
		webIP := dockertest.ContainerIP(testWeb+"-"+instance, egressNetwork)
		Expect(webIP).NotTo(BeEmpty())
		_, err := fetch(names["a"], "http://"+webIP+"/", false)
		Expect(err).To(HaveOccurred())
		bIP := dockertest.ContainerIP(readyB.Status.ProxyName, readyB.Status.NetworkName)
		Expect(bIP).NotTo(BeEmpty())
		_, err = fetchWithin(names["a"], "http://"+net.JoinHostPort(bIP, "3128")+"/", false, 2)
		Expect(err).To(HaveOccurred(), "another claimant's proxy is out of reach")
		port := hostService.Addr().(*net.TCPAddr).Port
		for _, addr := range dockertest.HostAddresses() {
			url := fmt.Sprintf("http://%s:%d/", addr, port)
			out, err := fetch(names["a"], url, true)
			Expect(err).To(HaveOccurred(), "through the proxy %s: %s", url, out)
			Expect(out).NotTo(ContainSubstring("host-secret"))
		}

		By("not resolving names through DNS")
		_, err = inSandbox(names["a"], "timeout 5 nslookup allowed.test")
		Expect(err).To(HaveOccurred())

		By("changing a claimant's allowlist in place")
		proxyA, err := dockertest.Inspect(readyA.Status.ProxyName)
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			cur := getSandbox(ctx, a)(g)
			cur.Spec.Egress = []afev1.EgressHost{"allowed.test", "denied.test"}
			g.Expect(k8sClient.Update(ctx, cur)).To(Succeed())
		}).Should(Succeed())
		Eventually(func() (string, error) { return fetchWithin(names["a"], "http://denied.test/", true, 1) }).Should(Equal("hello-from-test-web"))
		same, err := dockertest.Inspect(readyA.Status.ProxyName)
		Expect(err).NotTo(HaveOccurred())
		Expect(same.ID).To(Equal(proxyA.ID), "the claimed proxy was recreated for an allowlist change")

		By("making a claimed member's proxy again when it is removed by hand")
		Expect(dockertest.RemoveContainer(readyA.Status.ProxyName)).To(Succeed())
		Eventually(func() (string, error) { return fetchWithin(names["a"], "http://allowed.test/", true, 1) }, "30s").Should(Equal("hello-from-test-web"))
		remade, err := dockertest.Inspect(readyA.Status.ProxyName)
		Expect(err).NotTo(HaveOccurred())
		Expect(remade.Config.Labels).To(HaveKeyWithValue(afev1.LabelMemberName, proxyA.Config.Labels[afev1.LabelMemberName]))
		Expect(getSandbox(ctx, a)(Default).Status.ContainerID).To(Equal(readyA.Status.ContainerID))

		By("removing the member's proxy and network with the Sandbox")
		memberA := proxyA.Config.Labels[afev1.LabelMemberName]
		deleteAndWaitGone(ctx, a)
		Expect(dockertest.Objects(afev1.LabelMemberName + "=" + memberA)).To(BeEmpty())
		Expect(volumeExists(naming.Claim(naming.Key(ns, "a")))).To(BeFalse())
	})
})
