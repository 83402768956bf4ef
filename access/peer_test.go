package access_test

import (
	"archive/tar"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"path"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"afe.dev/sandbox/access"
	accessv1 "afe.dev/sandbox/api/access/v1alpha1"
	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/peerca"
	"afe.dev/sandbox/internal/placement"
	"afe.dev/sandbox/internal/ticketspec"
	"afe.dev/sandbox/move"
	"afe.dev/sandbox/test/dockertest"
)

var coordinationLease = schema.GroupVersionKind{Group: "coordination.k8s.io", Version: "v1", Kind: "Lease"}

// placementKey is the managers' key of the peer listeners here.
var placementKey = placement.Key("the access suite's placement key")

// placeholderOn makes the ticket's placeholder as a manager does (gated,
// signed with placementKey, the gate lifted) and binds it to node through
// the binding subresource, as kube-scheduler does.
func placeholderOn(ctx context.Context, tk *afev1.Ticket, node string) {
	pod := placement.Pod(tk, ticketspec.Sandboxes(tk), "x")
	ExpectWithOffset(1, adminClient.Create(ctx, pod)).To(Succeed())
	DeferCleanup(func() {
		ExpectWithOffset(1, client.IgnoreNotFound(adminClient.Delete(context.Background(), pod, client.GracePeriodSeconds(0)))).To(Succeed())
	})
	patch := client.MergeFromWithOptions(pod.DeepCopy(), client.MergeFromWithOptimisticLock{})
	placementKey.Seal(pod, tk.UID)
	ExpectWithOffset(1, adminClient.Patch(ctx, pod, patch)).To(Succeed())
	binding := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name},
		Target: corev1.ObjectReference{Kind: "Node", Name: node}}
	ExpectWithOffset(1, adminClient.SubResource("binding").Create(ctx, pod, binding)).To(Succeed())
}

// startPeerManager starts the access API of node's manager in per-node
// mode (its peer listener and Lease in ns, its certificates of auth),
// changed by edit if not nil, until the spec's cleanup.
func startPeerManager(ns, node string, auth *peerca.Authority, edit func(*access.Options)) *access.Server {
	opts := access.Options{
		BindAddress: "127.0.0.1:0",
		Service:     types.NamespacedName{Namespace: ns, Name: "afe-access"},
		Instance:    node,
		Peer:        &access.PeerOptions{Authority: auth, BindAddress: "127.0.0.1:0", PlacementKey: placementKey},
	}
	if edit != nil {
		edit(&opts)
	}
	srv, err := access.New(testManager, testEngine, opts)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	serverCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(serverCtx) }()
	DeferCleanup(func() {
		stop()
		Eventually(done).Should(Receive(BeNil()))
	})
	return srv
}

// The peer listener of per-node mode, on its own: a manager of node
// peer-a, and callers with and without a manager's certificate of the
// managers' CA (a Secret of a namespace of the spec's own).
var _ = Describe("Peer listener", Ordered, func() {
	var (
		ctx    context.Context
		server *access.Server
		// b is another node's manager.
		b *peerca.Authority
	)
	BeforeAll(func() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.Background(), 5*time.Minute)
		DeferCleanup(cancel)
		ns := newNamespace(ctx, "peers")
		secret := types.NamespacedName{Namespace: ns, Name: "afe-peer-ca"}
		a, err := peerca.New(adminClient, peerca.Options{Secret: secret, Node: "peer-a"})
		Expect(err).NotTo(HaveOccurred())
		Expect(a.Ensure(ctx)).To(Succeed())
		b, err = peerca.New(adminClient, peerca.Options{Secret: secret, Node: "peer-b"})
		Expect(err).NotTo(HaveOccurred())
		Expect(b.Ensure(ctx)).To(Succeed())
		server = startPeerManager(ns, "peer-a", a, nil)
		By("registering itself in its Lease")
		Eventually(func(g Gomega) {
			var lease metav1.PartialObjectMetadata
			lease.SetGroupVersionKind(coordinationLease)
			g.Expect(adminClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: "afe-peer-peer-a"}, &lease)).To(Succeed())
			g.Expect(lease.Annotations).To(HaveKeyWithValue(access.PeerAddressAnnotation, server.PeerAddr().String()))
		}).Should(Succeed())
	})

	// ask POSTs an exec of `true` in the sandbox to the peer listener over
	// cfg, naming user (empty: none) as the forwarded caller; it returns
	// the answer's code and Status, or the error.
	ask := func(cfg *tls.Config, ns, sandbox, user string) (int, metav1.Status, error) {
		u := url.URL{Scheme: "https", Host: server.PeerAddr().String(),
			Path:     path.Join("/apis", access.Group, access.Version, "namespaces", ns, "sandboxes", sandbox, "exec"),
			RawQuery: url.Values{"command": {"true"}, "stdout": {"true"}}.Encode()}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), nil)
		Expect(err).NotTo(HaveOccurred())
		if user != "" {
			req.Header.Set("X-Afe-Peer-User", user)
			req.Header.Add("X-Afe-Peer-Group", "system:authenticated")
		}
		resp, err := (&http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 30 * time.Second}).Do(req)
		if err != nil {
			return 0, metav1.Status{}, err
		}
		defer func() { _ = resp.Body.Close() }()
		var st metav1.Status
		_ = json.NewDecoder(resp.Body).Decode(&st)
		return resp.StatusCode, st, nil
	}

	It("authorizes the caller a manager forwards, by its identity alone", func() {
		code, st, err := ask(b.ClientConfig("peer-a"), nsB, "absent", "alice")
		Expect(err).NotTo(HaveOccurred())
		Expect(code).To(Equal(http.StatusForbidden), "%+v", st)
		Expect(st.Message).To(ContainSubstring(`User "alice" cannot create resource "sandboxes/exec"`))

		code, st, err = ask(b.ClientConfig("peer-a"), nsB, "absent", "bob")
		Expect(err).NotTo(HaveOccurred())
		Expect(code).To(Equal(http.StatusNotFound), "bob may, and the sandbox does not exist: %+v", st)
	})

	It("takes no identity from a manager that names none", func() {
		code, _, err := ask(b.ClientConfig("peer-a"), nsB, "absent", "")
		Expect(err).NotTo(HaveOccurred())
		Expect(code).To(Equal(http.StatusUnauthorized))
	})

	It("refuses a caller without a manager's certificate of the managers' CA, whatever headers it sends", func() {
		// A certificate of the managers' CA that is not a manager's: the
		// access API's serving certificate.
		serving := b.ServingCertificate([]string{"localhost"}, nil)
		cert, err := serving(nil)
		Expect(err).NotTo(HaveOccurred())
		// A manager's certificate of another CA (another Secret).
		other, err := peerca.New(adminClient, peerca.Options{Secret: types.NamespacedName{Namespace: nsB, Name: "other-ca"}, Node: "peer-b"})
		Expect(err).NotTo(HaveOccurred())
		Expect(other.Ensure(ctx)).To(Succeed())
		otherCfg := other.ClientConfig("peer-a")
		// Only the server's side is tried: the caller trusts any server.
		otherCfg.InsecureSkipVerify, otherCfg.VerifyConnection = true, nil
		for name, cfg := range map[string]*tls.Config{
			"no certificate":                  {InsecureSkipVerify: true},
			"a serving certificate of the CA": {InsecureSkipVerify: true, Certificates: []tls.Certificate{*cert}},
			"a manager's of another CA":       otherCfg,
		} {
			_, _, err := ask(cfg, nsB, "absent", "bob")
			Expect(err).To(HaveOccurred(), name)
		}
	})

	It("refuses a forwarded request for a sandbox placed on another node, and forwards nothing again", func() {
		tk := &afev1.Ticket{ObjectMeta: metav1.ObjectMeta{Namespace: nsB, Name: "elsewhere"},
			Spec: afev1.TicketSpec{Sandbox: afev1.SandboxTemplateSpec{Image: dockertest.TestImage, User: "1000:1000"}}}
		Expect(adminClient.Create(ctx, tk)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(adminClient.Delete(context.Background(), tk))).To(Succeed()) })
		Eventually(func(g Gomega) {
			g.Expect(adminClient.Get(ctx, client.ObjectKeyFromObject(tk), tk)).To(Succeed())
			g.Expect(tk.UID).NotTo(BeEmpty())
		}).Should(Succeed())
		placeholderOn(ctx, tk, "peer-c")
		Eventually(func(g Gomega) {
			code, st, err := ask(b.ClientConfig("peer-a"), nsB, tk.Name, "bob")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(code).To(Equal(http.StatusConflict), "%+v", st)
			g.Expect(st.Details).NotTo(BeNil())
			g.Expect(st.Details.Causes).To(ContainElement(HaveField("Type", metav1.CauseType(accessv1.ReasonSandboxNotReady))))
			g.Expect(st.Message).To(ContainSubstring("placed on node peer-c, not on peer-a"))
		}).Should(Succeed())
	})

	It("reads no node from a Pod of the placeholder's name no manager signed, whatever its controller reference", func() {
		tk := &afev1.Ticket{ObjectMeta: metav1.ObjectMeta{Namespace: nsB, Name: "forged"},
			Spec: afev1.TicketSpec{Sandbox: afev1.SandboxTemplateSpec{Image: dockertest.TestImage, User: "1000:1000"}}}
		Expect(adminClient.Create(ctx, tk)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(adminClient.Delete(context.Background(), tk))).To(Succeed()) })
		// A tenant's Pod: bound by hand, requesting nothing, naming the
		// Ticket as its controller, with a signature of another Pod.
		other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: nsB, Name: placement.PodName(tk.Name), UID: "another-pod"}}
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: nsB, Name: placement.PodName(tk.Name),
				Labels:          map[string]string{placement.PlaceholderLabel: "true"},
				Annotations:     map[string]string{placement.ProofAnnotation: placementKey.Sign(other, tk.UID)},
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(tk, afev1.GroupVersion.WithKind("Ticket"))}},
			Spec: corev1.PodSpec{NodeName: "peer-c", Containers: []corev1.Container{{Name: "c", Image: "x"}}},
		}
		Expect(adminClient.Create(ctx, pod)).To(Succeed())
		DeferCleanup(func() {
			Expect(client.IgnoreNotFound(adminClient.Delete(context.Background(), pod, client.GracePeriodSeconds(0)))).To(Succeed())
		})
		notPlaced := func(g Gomega) {
			code, st, err := ask(b.ClientConfig("peer-a"), nsB, tk.Name, "bob")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(code).To(Equal(http.StatusConflict), "%+v", st)
			g.Expect(st.Message).To(ContainSubstring("ticket forged of sandbox forged is not placed on a node yet"))
		}
		// Once the ticket's sandbox exists (a 404 before).
		Eventually(notPlaced).Should(Succeed())
		Consistently(notPlaced, "2s", "500ms").Should(Succeed())
	})

	// startPeers starts peer listeners of this engine's instance and of
	// peer-a, with certificates of a CA of ns (and one for peer-c, which
	// runs none), and the moves of peer-a's manager.
	startPeers := func(ns string) (map[string]*peerca.Authority, map[string]*access.Server, *move.Client) {
		secret := types.NamespacedName{Namespace: ns, Name: "afe-peer-ca"}
		authorities := map[string]*peerca.Authority{}
		for _, node := range []string{instance, "peer-a", "peer-c"} {
			auth, err := peerca.New(adminClient, peerca.Options{Secret: secret, Node: node})
			Expect(err).NotTo(HaveOccurred())
			Expect(auth.Ensure(ctx)).To(Succeed())
			authorities[node] = auth
		}
		servers := map[string]*access.Server{}
		for _, node := range []string{instance, "peer-a"} {
			servers[node] = startPeerManager(ns, node, authorities[node], nil)
		}
		moves := &move.Client{}
		moves.Attach(servers["peer-a"].MovePeers())
		Eventually(func() bool { return moves.Live(ctx, instance) }).Should(BeTrue())
		return authorities, servers, moves
	}
	// ticketPlacedOn is the Ready sandbox of a new ticket whose placeholder
	// is bound to node (this engine's manager runs it).
	ticketPlacedOn := func(ns, name, node string) *afev1.Sandbox {
		tk := &afev1.Ticket{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: afev1.TicketSpec{Sandbox: afev1.SandboxTemplateSpec{Image: dockertest.TestImage, User: "1000:1000"}}}
		Expect(adminClient.Create(ctx, tk)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(adminClient.Delete(context.Background(), tk))).To(Succeed()) })
		placeholderOn(ctx, tk, node)
		// The ticket's sandbox, of its name.
		sbx := &afev1.Sandbox{}
		Eventually(func(g Gomega) {
			g.Expect(adminClient.Get(ctx, client.ObjectKeyFromObject(tk), sbx)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(sbx.Status.Conditions, afev1.SandboxReadyCondition)).To(BeTrue())
		}, time.Minute).Should(Succeed())
		return sbx
	}
	// readTree reads a tree sent over the peer channel whole: each file's
	// size and content by its path, verified.
	readTree := func(ws *move.Workspace) (map[string]int64, map[string]string) {
		sizes, contents := map[string]int64{}, map[string]string{}
		tr := tar.NewReader(ws.Tree)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			Expect(err).NotTo(HaveOccurred())
			body, err := io.ReadAll(io.LimitReader(tr, 1<<10))
			Expect(err).NotTo(HaveOccurred())
			n, err := io.Copy(io.Discard, tr)
			Expect(err).NotTo(HaveOccurred())
			sizes[h.Name], contents[h.Name] = int64(len(body))+n, string(body)
		}
		_, err := io.Copy(io.Discard, ws.Tree)
		Expect(err).NotTo(HaveOccurred())
		Expect(ws.Tree.Close()).To(Succeed())
		Expect(ws.Verify()).To(Succeed())
		return sizes, contents
	}

	It("gives a workspace only to the manager of the node the sandbox's ticket is placed on, for its UID, verified", func() {
		// This engine's sandboxes are the suite's manager's: a peer
		// listener of that instance serves their moves.
		ns := newNamespace(ctx, "moves")
		authorities, servers, moves := startPeers(ns)
		By("a sandbox of a ticket placed on peer-a, run by this engine's manager")
		sbx := ticketPlacedOn(ns, "moving", "peer-a")
		out, err := exec.Command("docker", "exec", sbx.Status.ContainerName, "sh", "-c",
			"mkdir -p /workspace/d && echo moved > /workspace/d/f && head -c 300000 /dev/urandom > /workspace/blob").CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "%s", out)

		Expect(moves.Holds(ctx, instance, sbx)).To(BeTrue())
		other := sbx.DeepCopy()
		other.UID = "another-uid"
		Expect(moves.Holds(ctx, instance, other)).To(BeFalse(), "another UID is not held")
		_, err = moves.Workspace(ctx, instance, other)
		Expect(err).To(MatchError(move.ErrNothingToMove))

		By("refusing the manager of another node")
		u := url.URL{Scheme: "https", Host: servers[instance].PeerAddr().String(),
			Path:     "/afe-peer/v1/namespaces/" + ns + "/sandboxes/moving/workspace",
			RawQuery: url.Values{"uid": {string(sbx.UID)}}.Encode()}
		resp, err := (&http.Client{Transport: &http.Transport{TLSClientConfig: authorities["peer-c"].ClientConfig(instance)}}).Get(u.String())
		Expect(err).NotTo(HaveOccurred())
		_ = resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusForbidden))

		By("sending it whole to the manager of the node it is placed on")
		// This engine's manager runs the sandbox as a ticket placed
		// nowhere but here: it would replace a container stopped under it
		// as lost, with a fresh workspace. Suspended, it keeps both (the
		// node a ticket leaves no longer acts on its sandboxes).
		Expect(adminClient.Patch(ctx, sbx.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"suspend":true}}`)))).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(adminClient.Get(ctx, client.ObjectKeyFromObject(sbx), sbx)).To(Succeed())
			g.Expect(sbx.Status.Phase).To(Equal(afev1.SandboxSuspended))
		}, time.Minute).Should(Succeed())
		ws, err := moves.Workspace(ctx, instance, sbx)
		Expect(err).NotTo(HaveOccurred())
		Expect(ws.User).To(Equal("1000:1000"))
		files, _ := readTree(ws)
		Expect(files).To(HaveKeyWithValue("workspace/d/f", int64(len("moved\n"))))
		Expect(files).To(HaveKeyWithValue("workspace/blob", int64(300000)))
		ct, err := testEngine.InspectContainer(ctx, sbx.Status.ContainerName)
		Expect(err).NotTo(HaveOccurred())
		Expect(ct.Running).To(BeFalse(), "the container is left stopped")
	})

	It("lists and sends a ticket's snapshots only to the manager of the node it is placed on, found by their labels", func() {
		ns := newNamespace(ctx, "snaps")
		authorities, servers, moves := startPeers(ns)
		sbx := ticketPlacedOn(ns, "lost", "peer-a")
		ticketUID := string(metav1.GetControllerOf(sbx).UID)
		// Snapshot volumes as a Snapshot Run labels them (of an earlier
		// Sandbox of the ticket), and three that are not the ticket's.
		labels := func(edit map[string]string) []string {
			l := map[string]string{
				afev1.LabelController: instance, afev1.LabelRole: afev1.RoleSnapshot, afev1.LabelNamespace: ns,
				afev1.LabelSandbox: sbx.Name, afev1.LabelSandboxUID: string(sbx.UID), afev1.LabelTicket: "lost",
				afev1.LabelTicketUID: ticketUID, afev1.LabelUser: "1000:1000",
			}
			for k, v := range edit {
				l[k] = v
			}
			var args []string
			for k, v := range l {
				args = append(args, "--label", k+"="+v)
			}
			return args
		}
		volumes := map[string][]string{
			"afe-test-" + ns + "-snap-1":         labels(nil),
			"afe-test-" + ns + "-snap-2":         labels(nil),
			"afe-test-" + ns + "-other-ticket":   labels(map[string]string{afev1.LabelTicketUID: "another-ticket"}),
			"afe-test-" + ns + "-other-instance": labels(map[string]string{afev1.LabelController: "peer-z"}),
			"afe-test-" + ns + "-other-sandbox":  labels(map[string]string{afev1.LabelSandbox: "other"}),
		}
		for name, args := range volumes {
			out, err := exec.Command("docker", append(append([]string{"volume", "create"}, args...), name)...).CombinedOutput()
			Expect(err).NotTo(HaveOccurred(), "%s", out)
			DeferCleanup(func() { _ = exec.Command("docker", "volume", "rm", "-f", name).Run() })
			out, err = exec.Command("docker", "run", "--rm", "--network", "none", "-v", name+":/d", dockertest.TestImage,
				"sh", "-c", "echo "+name+" > /d/f && chown -R 1000:1000 /d").CombinedOutput()
			Expect(err).NotTo(HaveOccurred(), "%s", out)
		}
		snap := "afe-test-" + ns + "-snap-2"

		By("listing the ticket's own, of this sandbox's name, to the manager of the node it is placed on")
		found, unanswered := moves.Snapshots(ctx, sbx)
		Expect(unanswered).NotTo(HaveOccurred())
		var names []string
		for _, f := range found {
			Expect(f.Node).To(Equal(instance))
			Expect(f.Created).To(BeTemporally("~", time.Now(), 5*time.Minute))
			names = append(names, f.Volume)
		}
		Expect(names).To(ConsistOf("afe-test-"+ns+"-snap-1", snap))
		other := sbx.DeepCopy()
		other.UID = "another-uid"
		found, unanswered = moves.Snapshots(ctx, other)
		Expect(unanswered).NotTo(HaveOccurred())
		Expect(found).To(BeEmpty(), "another UID has no snapshots")

		By("sending one whole, with the owner of its files")
		ws, err := moves.Snapshot(ctx, instance, sbx, snap)
		Expect(err).NotTo(HaveOccurred())
		Expect(ws.User).To(Equal("1000:1000"))
		_, contents := readTree(ws)
		Expect(contents).To(HaveKeyWithValue("workspace/f", snap+"\n"))
		Eventually(func() (string, error) {
			out, err := exec.Command("docker", "ps", "-aq", "--filter", "name="+snap+"_send").Output()
			return string(out), err
		}).Should(BeEmpty(), "the helper that read it out is removed")

		By("sending no volume that is not the ticket's, whatever its name")
		for _, name := range []string{"afe-test-" + ns + "-other-ticket", "afe-test-" + ns + "-other-instance", "afe-test-" + ns + "-other-sandbox", "afe-" + ns} {
			_, err := moves.Snapshot(ctx, instance, sbx, name)
			Expect(err).To(MatchError(move.ErrNothingToMove), name)
		}

		By("refusing the manager of another node")
		for _, what := range []string{"snapshots", "snapshot"} {
			u := url.URL{Scheme: "https", Host: servers[instance].PeerAddr().String(),
				Path:     "/afe-peer/v1/namespaces/" + ns + "/sandboxes/lost/" + what,
				RawQuery: url.Values{"uid": {string(sbx.UID)}, "volume": {snap}}.Encode()}
			resp, err := (&http.Client{Transport: &http.Transport{TLSClientConfig: authorities["peer-c"].ClientConfig(instance)}}).Get(u.String())
			Expect(err).NotTo(HaveOccurred())
			_ = resp.Body.Close()
			Expect(resp.StatusCode).To(Equal(http.StatusForbidden), what)
		}
	})
})
