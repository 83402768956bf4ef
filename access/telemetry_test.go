package access_test

import (
	"context"
	"encoding/json"
	"net/http"
	"path"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"

	"afe.dev/sandbox/access"
	"afe.dev/sandbox/internal/telemetry"
)

// telemetryRequest reads the records of the sandbox "tele" (or the ticket
// of that name) through the API server as the config's user.
func telemetryRequest(ctx context.Context, cfg *rest.Config, ns, resource string) (*telemetry.RecordList, int) {
	const name = "tele"
	base, _, err := rest.DefaultServerUrlFor(cfg)
	Expect(err).NotTo(HaveOccurred())
	u := *base
	u.Path = path.Join("/apis", access.Group, access.Version, "namespaces", ns, resource, name, "telemetry")
	hc, err := rest.HTTPClientFor(cfg)
	Expect(err).NotTo(HaveOccurred())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	Expect(err).NotTo(HaveOccurred())
	resp, err := hc.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, resp.StatusCode
	}
	list := &telemetry.RecordList{}
	Expect(json.NewDecoder(resp.Body).Decode(list)).To(Succeed())
	return list, resp.StatusCode
}

var _ = Describe("Command telemetry through the access API", Ordered, func() {
	var ctx context.Context
	var cancel context.CancelFunc
	BeforeAll(func() {
		ctx, cancel = context.WithTimeout(context.Background(), 5*time.Minute)
		DeferCleanup(func() { cancel() })
		readySandbox(ctx, nsA, "tele")
		readySandbox(ctx, nsB, "tele")
	})

	It("records an exec through the API with the caller's name, and serves a sandbox's records to its own namespace only", func() {
		res := execIn(ctx, alice, nsA, "tele", []string{"sh", "-c", "echo hello; exit 3"}, remotecommand.StreamOptions{})
		Expect(res.err).NotTo(HaveOccurred())
		Expect(res.code).To(Equal(3))
		var recs []telemetry.Record
		Eventually(func() []telemetry.Record {
			list, code := telemetryRequest(ctx, alice, nsA, "sandboxes")
			Expect(code).To(Equal(http.StatusOK))
			recs = list.Items
			return recs
		}).Should(HaveLen(1))
		// Once: the engine's exec events of the API's own exec are not
		// recorded again as an engine exec.
		Consistently(func() int {
			list, _ := telemetryRequest(ctx, alice, nsA, "sandboxes")
			return len(list.Items)
		}, "3s", "500ms").Should(Equal(1))
		r := recs[0]
		Expect(r.Source).To(Equal(telemetry.SourceAPI))
		Expect(r.StartedBy).To(Equal("user alice"))
		Expect(r.Command).To(Equal([]string{"sh", "-c", "echo hello; exit 3"}))
		Expect(r.ExitCode).To(Equal(3))
		Expect(r.User).To(Equal("1000:1000"))
		Expect(r.Seq).To(BeEquivalentTo(1))
		Expect(r.OutputBytes).To(BeEquivalentTo(len("hello\n")))
		Expect(r.Namespace).To(Equal(nsA))

		By("the ticket's records: a sandbox without ticket is its own")
		list, code := telemetryRequest(ctx, alice, nsA, "tickets")
		Expect(code).To(Equal(http.StatusOK))
		Expect(list.Items).To(HaveLen(1))

		By("refusing the other namespace and anonymous callers")
		_, code = telemetryRequest(ctx, bob, nsA, "sandboxes")
		Expect(code).To(Equal(http.StatusForbidden))
		_, code = telemetryRequest(ctx, alice, nsB, "tickets")
		Expect(code).To(Equal(http.StatusForbidden))
		_, code = telemetryRequest(ctx, anonymous(), nsA, "sandboxes")
		Expect(code).To(BeElementOf(http.StatusForbidden, http.StatusUnauthorized))
	})
})
