package controllers

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/connlimit"
)

// elementsOf are the elements of a set of the suite manager's conntrack
// table.
func elementsOf(ctx context.Context, set string) []string {
	elems, err := testConnLimits.Elements(ctx, set)
	Expect(err).NotTo(HaveOccurred())
	return elems
}

var _ = Describe("The host's conntrack bound", func() {
	ctx := context.Background()
	var ns string
	BeforeEach(func() { ns = newNamespace(ctx) })

	It("holds a sandbox's network and its proxy's egress address once it is Ready, and lets them go with it", func() {
		sbx := newSandbox(ns, "bounded")
		sbx.Spec.Egress = []afev1.EgressHost{"allowed.test"}
		Expect(k8sClient.Create(ctx, sbx)).To(Succeed())
		got := waitReady(ctx, sbx)

		network, err := testEngine.InspectNetwork(ctx, got.Status.NetworkName)
		Expect(err).NotTo(HaveOccurred())
		Expect(network.Subnets).To(HaveLen(1))
		proxy, err := testEngine.InspectContainer(ctx, got.Status.ProxyName)
		Expect(err).NotTo(HaveOccurred())
		Expect(proxy.IPs).To(HaveKey(egressNetwork))
		Expect(elementsOf(ctx, connlimit.SetNetworks)).To(ContainElement(network.Subnets[0]))
		Expect(elementsOf(ctx, connlimit.SetProxies)).To(ContainElement(proxy.IPs[egressNetwork]))

		deleteAndWaitGone(ctx, sbx)
		Eventually(func() []string { return elementsOf(ctx, connlimit.SetNetworks) }, 30*time.Second).ShouldNot(ContainElement(network.Subnets[0]))
		Eventually(func() []string { return elementsOf(ctx, connlimit.SetProxies) }, 30*time.Second).ShouldNot(ContainElement(proxy.IPs[egressNetwork]))
	})
})
