package fast

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/naming"
	"afe.dev/sandbox/test/fakeengine"
)

// An engine out of address pools (about 30 networks with Docker's defaults)
// holds back the sandboxes with egress, says why, and lets them through once
// a pool is free again; sandboxes without egress need no network.
var _ = Describe("Address pool exhaustion", func() {
	It("holds an egress sandbox back until a pool is free", func(ctx context.Context) {
		ns := newNamespace(ctx)
		engine.SetAddressPools(0)
		DeferCleanup(func() { engine.SetAddressPools(fakeengine.DefaultAddressPools) })

		egress := newSandbox(ns, "egress", "example.com")
		create(ctx, egress)
		plain := newSandbox(ns, "plain")
		create(ctx, plain)

		got := waitCondition(ctx, egress, afev1.EgressReadyCondition, "False", afev1.AddressPoolExhaustedReason)
		Expect(conditionStatus(got, afev1.SandboxReadyCondition)).To(BeEquivalentTo("False"))
		waitReady(ctx, plain)
		Expect(container(ctx, naming.Proxy(key(egress)))).To(BeNil())
		Expect(container(ctx, naming.Container(key(egress)))).To(BeNil())

		By("freeing pools")
		engine.SetAddressPools(fakeengine.DefaultAddressPools)
		got = waitReady(ctx, egress)
		Expect(got.Status.NetworkName).To(Equal(naming.Network(key(egress))))
		c := container(ctx, naming.Container(key(egress)))
		Expect(c).NotTo(BeNil())
		Expect(c.IPs).To(HaveKey(naming.Network(key(egress))))
		Expect(container(ctx, naming.Proxy(key(egress)))).NotTo(BeNil())
	})
})
