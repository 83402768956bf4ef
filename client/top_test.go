package client_test

import (
	"context"
	"math"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	. "github.com/onsi/gomega/gstruct"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/client"
	"afe.dev/sandbox/test/dockertest"
)

// The usage of these sandboxes is written into their status here, as the
// controller's usage collector would: they are suspended, so the
// collector, which measures running containers only, never writes over it.
var _ = Describe("The Go client's top, from status.usage through the API", Ordered, func() {
	var (
		ctx      = context.Background()
		c        *client.Client
		measured = metav1.NewTime(time.Now().Add(-time.Minute).Truncate(time.Second))
	)

	BeforeAll(func() {
		c = clientIn(alice, nsA)
		By("creating suspended Sandboxes and writing their status.usage")
		createTopSandboxes(measured)
	})

	It("lists a row per sandbox of alice's namespace, sorted by CPU time", func() {
		rows, err := c.Top(ctx, client.TopOptions{SortBy: client.SortByCPU})
		Expect(err).NotTo(HaveOccurred())
		Expect(rowNames(rows)).To(Equal([]string{nsA + "/top-t1", nsA + "/top-solo", nsA + "/top-t1-b", nsA + "/top-fresh"}))
		Expect(rows[0].Ticket).To(Equal("top-t1"))
		Expect(rows[0].MemoryBytes).To(BeEquivalentTo(10 << 20))
		Expect(rows[0].Time.Time).To(BeTemporally("==", measured.Time))
		Expect(rows[1].DiskBytes).To(BeZero(), "a negative figure counts as zero")
		Expect(rows[3].Measured).To(BeZero(), "a sandbox not measured yet has a row without figures")
	})

	It("sums per ticket and per namespace, saturating", func() {
		rows, err := c.Top(ctx, client.TopOptions{By: client.ByTicket, SortBy: client.SortByMemory})
		Expect(err).NotTo(HaveOccurred())
		Expect(rowNames(rows)).To(Equal([]string{nsA + "/top-solo", nsA + "/top-t1", nsA + "/top-fresh"}))
		Expect(rows[1]).To(MatchFields(IgnoreExtras, Fields{"Sandboxes": Equal(2), "Measured": Equal(2),
			"Usage": MatchFields(IgnoreExtras, Fields{"CPUMilliseconds": BeEquivalentTo(4000), "MemoryBytes": BeEquivalentTo(40 << 20),
				"DiskBytes": BeEquivalentTo(5 << 20), "NetworkReceiveBytes": BeEquivalentTo(7)})}))

		rows, err = c.Top(ctx, client.TopOptions{By: client.ByNamespace})
		Expect(err).NotTo(HaveOccurred())
		Expect(rows).To(ConsistOf(MatchFields(IgnoreExtras, Fields{"Name": Equal(nsA), "Sandboxes": Equal(4), "Measured": Equal(3),
			"Usage": MatchFields(IgnoreExtras, Fields{"CPUMilliseconds": BeEquivalentTo(6000), "MemoryBytes": BeEquivalentTo(int64(math.MaxInt64))})})))
	})

	It("selects by label", func() {
		rows, err := c.Top(ctx, client.TopOptions{Selector: "top=y"})
		Expect(err).NotTo(HaveOccurred())
		Expect(rowNames(rows)).To(Equal([]string{nsA + "/top-t1-b"}))
	})

	It("refuses alice bob's namespace and all namespaces, and gives them to an admin", func() {
		_, err := clientIn(alice, nsB).Top(ctx, client.TopOptions{})
		Expect(client.IsForbidden(err)).To(BeTrue(), "%v", err)
		_, err = c.Top(ctx, client.TopOptions{AllNamespaces: true})
		Expect(client.IsForbidden(err)).To(BeTrue(), "%v", err)

		rows, err := clientIn(testEnv.Config, "default").Top(ctx, client.TopOptions{AllNamespaces: true, By: client.ByNamespace, Selector: "top"})
		Expect(err).NotTo(HaveOccurred())
		Expect(rowNames(rows)).To(ConsistOf(nsA+"/"+nsA, nsB+"/"+nsB))
	})
})

// createTopSandboxes makes the Sandboxes of the top specs, deleted after
// them: in alice's namespace a ticket's two, two without a ticket (one not
// measured yet), and one in bob's.
func createTopSandboxes(measured metav1.Time) {
	for _, sbx := range []*afev1.Sandbox{
		usageSandbox(nsA, "top-t1", "top-t1", "x",
			&afev1.Usage{CPUMilliseconds: 3000, MemoryBytes: 10 << 20, DiskBytes: 5 << 20, Time: measured}),
		usageSandbox(nsA, "top-t1-b", "top-t1", "y",
			&afev1.Usage{CPUMilliseconds: 1000, MemoryBytes: 30 << 20, NetworkReceiveBytes: 7, Time: measured}),
		usageSandbox(nsA, "top-solo", "", "x",
			&afev1.Usage{CPUMilliseconds: 2000, MemoryBytes: math.MaxInt64, DiskBytes: -1, Time: measured}),
		usageSandbox(nsA, "top-fresh", "", "x", nil),
		usageSandbox(nsB, "top-bobs", "", "x", &afev1.Usage{CPUMilliseconds: 9000, Time: measured}),
	} {
		DeferCleanup(func() {
			Expect(ctrlclient.IgnoreNotFound(adminClient.Delete(context.Background(), sbx))).To(Succeed())
		})
	}
}

// clientIn is a Client with cfg's identity in namespace ns.
func clientIn(cfg *rest.Config, ns string) *client.Client {
	c, err := client.New(cfg, client.WithNamespace(ns))
	Expect(err).NotTo(HaveOccurred())
	return c
}

// rowNames is namespace/name of each row.
func rowNames(rows []client.UsageRow) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.Namespace + "/" + r.Name
	}
	return out
}

// usageSandbox creates a suspended Sandbox with the label top=label and,
// when usage is set, writes it into its status.
func usageSandbox(ns, name, ticket, label string, usage *afev1.Usage) *afev1.Sandbox {
	sbx := &afev1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"top": label}}}
	sbx.Spec.Image = dockertest.TestImage
	sbx.Spec.Suspend = true
	if ticket != "" {
		sbx.Spec.TicketRef = &afev1.TicketReference{Name: ticket}
	}
	Expect(adminClient.Create(context.Background(), sbx)).To(Succeed())
	if usage != nil {
		Eventually(func() error {
			if err := adminClient.Get(context.Background(), ctrlclient.ObjectKeyFromObject(sbx), sbx); err != nil {
				return err
			}
			before := sbx.DeepCopy()
			sbx.Status.Usage = usage
			return adminClient.Status().Patch(context.Background(), sbx, ctrlclient.MergeFrom(before))
		}).Should(Succeed())
	}
	return sbx
}
