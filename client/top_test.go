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

	accessv1 "afe.dev/sandbox/api/access/v1alpha1"
	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/client"
	"afe.dev/sandbox/internal/usage"
	"afe.dev/sandbox/test/dockertest"
)

// The usage of these sandboxes is put into the manager's memory here, as
// its usage collector would (the suite's measures nothing: its store is
// the specs'), and read through the access API.
var _ = Describe("The Go client's top and usage, from the manager's memory through the access API", Ordered, func() {
	var (
		ctx      = context.Background()
		c        *client.Client
		measured = metav1.NewTime(time.Now().Add(-time.Minute).Truncate(time.Second))
	)

	BeforeAll(func() {
		c = clientIn(alice, nsA)
		By("creating suspended Sandboxes, and their figures in the manager's memory")
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

	It("reads one sandbox's figures, and says why there are none", func() {
		u, err := c.Usage(ctx, "top-t1")
		Expect(err).NotTo(HaveOccurred())
		Expect(u.Ticket).To(Equal("top-t1"))
		Expect(u.Usage.CPUMilliseconds).To(BeEquivalentTo(3000))
		Expect(u.Timestamp.Time).To(BeTemporally("==", measured.Time))
		_, err = c.Usage(ctx, "top-fresh")
		Expect(client.IsNotFound(err)).To(BeTrue(), "%v", err)
		Expect(client.ReasonOf(err)).To(Equal(string(accessv1.ReasonUsageNotMeasured)))
		_, err = c.Usage(ctx, "top-none")
		Expect(client.ReasonOf(err)).To(Equal(string(accessv1.ReasonSandboxNotFound)))
		_, err = clientIn(alice, nsB).Usage(ctx, "top-bobs")
		Expect(client.IsForbidden(err)).To(BeTrue(), "%v", err)
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
// them, and their figures as measured: in alice's namespace a ticket's
// two, two without a ticket (one not measured yet), and one in bob's.
func createTopSandboxes(measured metav1.Time) {
	type sandbox struct {
		ns, name, ticket, label string
		usage                   *accessv1.Usage
	}
	var samples []usage.Sample
	for _, s := range []sandbox{
		{nsA, "top-t1", "top-t1", "x", &accessv1.Usage{CPUMilliseconds: 3000, MemoryBytes: 10 << 20, DiskBytes: 5 << 20}},
		{nsA, "top-t1-b", "top-t1", "y", &accessv1.Usage{CPUMilliseconds: 1000, MemoryBytes: 30 << 20, NetworkReceiveBytes: 7}},
		{nsA, "top-solo", "", "x", &accessv1.Usage{CPUMilliseconds: 2000, MemoryBytes: math.MaxInt64, DiskBytes: -1}},
		{nsA, "top-fresh", "", "x", nil},
		{nsB, "top-bobs", "", "x", &accessv1.Usage{CPUMilliseconds: 9000}},
	} {
		sbx := suspendedSandbox(s.ns, s.name, s.ticket, s.label)
		DeferCleanup(func() {
			Expect(ctrlclient.IgnoreNotFound(adminClient.Delete(context.Background(), sbx))).To(Succeed())
		})
		if s.usage != nil {
			samples = append(samples, usage.Sample{Namespace: s.ns, Name: s.name, UID: sbx.UID, Ticket: s.ticket,
				Labels: sbx.Labels, Usage: *s.usage})
		}
	}
	measuredUsage.Set(measured.Time, time.Minute, samples)
	DeferCleanup(func() { measuredUsage.Set(time.Now(), time.Minute, nil) })
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

// suspendedSandbox creates a suspended Sandbox with the label top=label.
func suspendedSandbox(ns, name, ticket, label string) *afev1.Sandbox {
	sbx := &afev1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"top": label}}}
	sbx.Spec.Image = dockertest.TestImage
	sbx.Spec.Suspend = true
	if ticket != "" {
		sbx.Spec.TicketRef = &afev1.TicketReference{Name: ticket}
	}
	Expect(adminClient.Create(context.Background(), sbx)).To(Succeed())
	return sbx
}
