package access_test

import (
	"context"
	"net/http"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	accessv1 "afe.dev/sandbox/api/access/v1alpha1"
	"afe.dev/sandbox/internal/telemetry"
)

// egressRequest reads the egress records of the sandbox (or the ticket) of
// that name through the API server as the config's user, with the query.
func egressRequest(ctx context.Context, cfg *rest.Config, ns, resource, name, query string) (*telemetry.EgressRecordList, int) {
	list, code := telemetryGet[telemetry.EgressRecordList](ctx, cfg, ns, resource, name, query)
	if list != nil {
		Expect(list.Kind).To(Equal(accessv1.EgressRecordListKind))
	}
	return list, code
}

// The egress records are read through the same subresource, and so the same
// RBAC, as the commands: the store is filled here as the follower fills it
// (its own test has the engine's side).
var _ = Describe("Egress telemetry through the access API", func() {
	It("serves a sandbox's and a ticket's egress records, the denied ones alone on asking, to their own namespace only", func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		now := time.Now().UTC()
		for i, host := range []string{"allowed.test", "denied.test"} {
			decision := accessv1.EgressAllowed
			if i == 1 {
				decision = accessv1.EgressDenied
			}
			Expect(store.AddEgress(ctx, telemetry.Egress{Record: telemetry.EgressRecord{Namespace: nsA, Sandbox: "egress-box", SandboxUID: "uid-egress-box",
				Ticket: "egress-tk", Time: now, Duration: metav1.Duration{Duration: time.Millisecond}, Method: "CONNECT", Host: host, Port: 443,
				Decision: decision, Proxy: "proxy-egress-box"}, Cursor: telemetry.Cursor{At: now, N: i}})).To(Succeed())
		}
		Expect(store.Flush(ctx)).To(Succeed())

		list, code := egressRequest(ctx, alice, nsA, "sandboxes", "egress-box", "egress=true")
		Expect(code).To(Equal(http.StatusOK))
		Expect(list.Items).To(HaveLen(2))
		Expect(list.Items[0].Host).To(Equal("allowed.test"))
		Expect(list.Items[1].Seq).To(BeEquivalentTo(2))
		list, code = egressRequest(ctx, alice, nsA, "tickets", "egress-tk", "egress=true&denied=true")
		Expect(code).To(Equal(http.StatusOK))
		Expect(list.Items).To(HaveLen(1))
		Expect(list.Items[0].Host).To(Equal("denied.test"))
		_, code = egressRequest(ctx, alice, nsA, "sandboxes", "egress-box", "egress=maybe")
		Expect(code).To(Equal(http.StatusBadRequest))

		By("refusing the other namespace's user")
		_, code = egressRequest(ctx, bob, nsA, "sandboxes", "egress-box", "egress=true")
		Expect(code).To(Equal(http.StatusForbidden))
		_, code = egressRequest(ctx, bob, nsA, "tickets", "egress-tk", "egress=true&denied=true")
		Expect(code).To(Equal(http.StatusForbidden))
	})
})
