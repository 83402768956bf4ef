package access_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"net/url"
	"path"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"afe.dev/sandbox/access"
	accessv1 "afe.dev/sandbox/api/access/v1alpha1"
	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/peerca"
	"afe.dev/sandbox/internal/usage"
)

// usageRequest GETs sandboxusages (namespace and name may be empty: the
// list of every namespace, of one) with the query, through the API server
// as the config's user: the code and the body.
func usageRequest(ctx context.Context, cfg *rest.Config, ns, name string, query url.Values) (int, []byte) {
	elems := []string{"namespaces", ns, accessv1.ResourceSandboxUsages, name}
	if ns == "" {
		elems = []string{accessv1.ResourceSandboxUsages}
	}
	code, body := status(accessGet(ctx, cfg, query.Encode(), elems...))
	return code, []byte(body)
}

// usageOf is the SandboxUsage of a sandbox, read as cfg's user; it fails
// the spec unless the answer is 200.
func usageOf(ctx context.Context, g Gomega, cfg *rest.Config, ns, name string) accessv1.SandboxUsage {
	code, body := usageRequest(ctx, cfg, ns, name, nil)
	g.ExpectWithOffset(1, code).To(Equal(http.StatusOK), "%s", body)
	var item accessv1.SandboxUsage
	g.ExpectWithOffset(1, json.Unmarshal(body, &item)).To(Succeed())
	return item
}

// usageList is the list of sandboxusages of ns (every namespace when
// empty), read as cfg's user with the label selector.
func usageList(ctx context.Context, g Gomega, cfg *rest.Config, ns, selector string) accessv1.SandboxUsageList {
	code, body := usageRequest(ctx, cfg, ns, "", url.Values{accessv1.ParamLabelSelector: {selector}})
	g.ExpectWithOffset(1, code).To(Equal(http.StatusOK), "%s", body)
	var list accessv1.SandboxUsageList
	g.ExpectWithOffset(1, json.Unmarshal(body, &list)).To(Succeed())
	return list
}

// refusal is the access API's reason of an answer that is a Status.
func refusal(body []byte) accessv1.Reason {
	var st metav1.Status
	ExpectWithOffset(1, json.Unmarshal(body, &st)).To(Succeed(), "%s", body)
	return accessv1.ReasonOf(&st)
}

// itemNames is namespace/name of each item.
func itemNames(items []accessv1.SandboxUsage) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.Namespace + "/" + it.Name
	}
	return out
}

// What sandboxes use is served from the manager's memory, as
// metrics-server serves what Pods use, to whoever may get or list
// sandboxusages in the namespace (afe-sandbox-user, afe-sandbox-viewer).
var _ = Describe("What sandboxes use, through the access API", Ordered, func() {
	var (
		ctx   context.Context
		used  *afev1.Sandbox
		viewr *rest.Config
	)

	BeforeAll(func() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.Background(), 5*time.Minute)
		DeferCleanup(cancel)
		viewr = addUserWithRole("frank", nsA, "afe-sandbox-viewer")
		// 3 MiB in the workspace as the container starts.
		used = readySandboxUnder(ctx, nsA, "used", "", func(sbx *afev1.Sandbox) {
			sbx.Labels = map[string]string{"team": "a"}
			sbx.Spec.Command = []string{"sh", "-c", "dd if=/dev/zero of=/workspace/data bs=1M count=3 2>/dev/null; exec sleep 86400"}
		})
		resting := &afev1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "resting"}}
		resting.Spec.Image, resting.Spec.Suspend = used.Spec.Image, true
		Expect(adminClient.Create(ctx, resting)).To(Succeed())
		DeferCleanup(func() {
			_ = adminClient.Delete(context.Background(), used)
			_ = adminClient.Delete(context.Background(), resting)
		})
	})

	It("serves a sandbox's figures, measured by the manager, to its namespace's user and viewer", func() {
		var item accessv1.SandboxUsage
		Eventually(func(g Gomega) {
			item = usageOf(ctx, g, alice, nsA, "used")
			g.Expect(item.Usage.WorkspaceBytes).To(BeNumerically(">=", 3<<20))
		}, "30s", "500ms").Should(Succeed())
		Expect(item.Kind).To(Equal(accessv1.SandboxUsageKind))
		Expect(item.APIVersion).To(Equal(accessv1.SchemeGroupVersion.String()))
		Expect(item.UID).To(Equal(used.UID), "measured as this Sandbox")
		Expect(item.Labels).To(HaveKeyWithValue("team", "a"))
		Expect(item.Ticket).To(BeEmpty())
		Expect(item.Window.Duration).To(Equal(usagePeriod))
		Expect(item.Timestamp.Time).To(BeTemporally("~", time.Now(), time.Minute))
		Expect(item.Usage.MemoryBytes).To(BeNumerically(">", 0))
		Expect(item.Usage.DiskBytes).To(Equal(item.Usage.WritableLayerBytes + item.Usage.WorkspaceBytes))
		Expect(item.Usage.NetworkReceiveBytes).To(BeZero(), "no network")

		By("to afe-sandbox-viewer, one by one and as a list of the namespace, by label")
		Expect(usageOf(ctx, Default, viewr, nsA, "used").UID).To(Equal(used.UID))
		list := usageList(ctx, Default, viewr, nsA, "")
		Expect(list.Kind).To(Equal(accessv1.SandboxUsageListKind))
		Expect(itemNames(list.Items)).To(ContainElement(nsA + "/used"))
		Expect(itemNames(list.Items)).NotTo(ContainElement(nsA+"/resting"), "a suspended sandbox is not measured")
		Expect(itemNames(usageList(ctx, Default, viewr, nsA, "team=a").Items)).To(Equal([]string{nsA + "/used"}))
		Expect(usageList(ctx, Default, viewr, nsA, "team=b").Items).To(BeEmpty())

		By("to an admin, in every namespace")
		Expect(itemNames(usageList(ctx, Default, adminConfig, "", "team=a").Items)).To(ContainElement(nsA + "/used"))
	})

	It("refuses another namespace's user, every namespace to a namespace's user, and callers without credentials", func() {
		for _, req := range []struct {
			cfg      *rest.Config
			ns, name string
		}{{bob, nsA, "used"}, {bob, nsA, ""}, {alice, nsB, ""}, {alice, "", ""}} {
			code, body := usageRequest(ctx, req.cfg, req.ns, req.name, nil)
			Expect(code).To(Equal(http.StatusForbidden), "%s/%s: %s", req.ns, req.name, body)
			Expect(string(body)).NotTo(ContainSubstring("workspaceBytes"))
		}
		code, _ := usageRequest(ctx, anonymous(), nsA, "used", nil)
		Expect(code).To(BeElementOf(http.StatusForbidden, http.StatusUnauthorized))
	})

	It("answers 404 with the reason for a sandbox not measured and for none, and refuses a watch", func() {
		code, body := usageRequest(ctx, alice, nsA, "resting", nil)
		Expect(code).To(Equal(http.StatusNotFound), "%s", body)
		Expect(refusal(body)).To(Equal(accessv1.ReasonUsageNotMeasured))
		code, body = usageRequest(ctx, alice, nsA, "nothing-here", nil)
		Expect(code).To(Equal(http.StatusNotFound), "%s", body)
		Expect(refusal(body)).To(Equal(accessv1.ReasonSandboxNotFound))
		code, body = usageRequest(ctx, adminConfig, nsA, "", url.Values{"watch": {"true"}})
		Expect(code).To(Equal(http.StatusMethodNotAllowed), "%s", body)
	})

	It("names sandboxusages in discovery, with get and list", func() {
		dc, err := discovery.NewDiscoveryClientForConfig(alice)
		Expect(err).NotTo(HaveOccurred())
		resources, err := dc.ServerResourcesForGroupVersion(access.Group + "/" + access.Version)
		Expect(err).NotTo(HaveOccurred())
		Expect(resources.APIResources).To(ContainElement(And(
			HaveField("Name", accessv1.ResourceSandboxUsages), HaveField("Kind", accessv1.SandboxUsageKind),
			HaveField("Namespaced", true), HaveField("Verbs", ConsistOf("get", "list")))))
	})
})

// In per-node mode a list is gathered from every node's manager, each
// asked as the caller, who is authorized again there; a node whose
// manager is gone is named, as telemetry names it. Two managers of this
// suite's engine stand for two nodes, each with figures of its own.
var _ = Describe("What sandboxes use, gathered from every node's manager", Ordered, func() {
	var (
		ctx     context.Context
		servers = map[string]*access.Server{}
	)

	BeforeAll(func() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.Background(), 5*time.Minute)
		DeferCleanup(cancel)
		ns := newNamespace(ctx, "usage-peers")
		secret := types.NamespacedName{Namespace: ns, Name: "afe-peer-ca"}
		now := time.Now()
		measured := map[string][]usage.Sample{
			"node-1": {{Namespace: nsA, Name: "on-1", UID: "uid-1", Usage: accessv1.Usage{CPUMilliseconds: 1000}}},
			"node-2": {{Namespace: nsA, Name: "on-2", UID: "uid-2", Ticket: "t", Usage: accessv1.Usage{CPUMilliseconds: 2000}},
				{Namespace: nsB, Name: "bobs-2", UID: "uid-3", Usage: accessv1.Usage{CPUMilliseconds: 3000}}},
		}
		for _, node := range []string{"node-1", "node-2"} {
			auth, err := peerca.New(adminClient, peerca.Options{Secret: secret, Node: node})
			Expect(err).NotTo(HaveOccurred())
			Expect(auth.Ensure(ctx)).To(Succeed())
			store := &usage.Store{}
			store.Set(now, usagePeriod, measured[node])
			servers[node] = startPeerManager(ns, node, auth, func(o *access.Options) { o.Usage = store })
		}
		By("and node-3, whose manager was last seen an hour ago")
		stale := metav1.NewMicroTime(now.Add(-time.Hour))
		Expect(adminClient.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "afe-peer-node-3", Labels: map[string]string{access.PeerLabel: "true"},
				Annotations: map[string]string{access.PeerAddressAnnotation: "127.0.0.1:1"}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("node-3"), LeaseDurationSeconds: ptr.To(int32(20)), RenewTime: &stale},
		})).To(Succeed())
		for _, node := range []string{"node-1", "node-2"} {
			Eventually(func(g Gomega) {
				var lease coordinationv1.Lease
				g.Expect(adminClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: "afe-peer-" + node}, &lease)).To(Succeed())
			}).Should(Succeed())
		}
	})

	// listAt lists the sandboxusages of ns at node's manager, straight to
	// its port with cfg's client certificate (one of the API server's
	// client CA, which the manager accepts as the API server would).
	listAt := func(node string, cfg *rest.Config, ns string) (int, accessv1.SandboxUsageList, []string) {
		pair, err := tls.X509KeyPair(cfg.CertData, cfg.KeyData)
		Expect(err).NotTo(HaveOccurred())
		roots := x509.NewCertPool()
		Expect(roots.AppendCertsFromPEM(servers[node].CABundle())).To(BeTrue())
		hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: roots, MinVersion: tls.VersionTLS12}}}
		u := url.URL{Scheme: "https", Host: servers[node].Addr().String(),
			Path: path.Join("/apis", access.Group, access.Version, "namespaces", ns, accessv1.ResourceSandboxUsages)}
		resp, err := hc.Get(u.String())
		Expect(err).NotTo(HaveOccurred())
		code, body := status(resp)
		var list accessv1.SandboxUsageList
		if code == http.StatusOK {
			Expect(json.Unmarshal([]byte(body), &list)).To(Succeed())
		}
		return code, list, resp.Header.Values("Warning")
	}

	It("lists every node's sandboxes of the namespace, from whichever manager is asked, naming the node that did not answer", func() {
		for _, node := range []string{"node-1", "node-2"} {
			code, list, warnings := listAt(node, alice, nsA)
			Expect(code).To(Equal(http.StatusOK))
			Expect(itemNames(list.Items)).To(Equal([]string{nsA + "/on-1", nsA + "/on-2"}), "asked at %s", node)
			Expect(list.Items[1].Ticket).To(Equal("t"))
			Expect(list.Items[1].Usage.CPUMilliseconds).To(BeEquivalentTo(2000))
			Expect(list.Unanswered).To(ConsistOf(And(HaveField("Node", "node-3"), HaveField("Message", ContainSubstring("not running (last seen")))))
			Expect(warnings).To(ConsistOf(HavePrefix(`299 - "node node-3 did not answer`)), "an API warning too")
		}
		code, list, _ := listAt("node-1", bob, nsB)
		Expect(code).To(Equal(http.StatusOK))
		Expect(itemNames(list.Items)).To(Equal([]string{nsB + "/bobs-2"}), "node-2's, for bob")
	})

	It("refuses another namespace's user at the manager asked", func() {
		code, list, _ := listAt("node-1", bob, nsA)
		Expect(code).To(Equal(http.StatusForbidden))
		Expect(list.Items).To(BeEmpty())
	})
})
