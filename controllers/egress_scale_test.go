package controllers

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/naming"
	"afe.dev/sandbox/internal/subnets"
	"afe.dev/sandbox/test/dockertest"
)

// egressAtScale is how many sandboxes with egress the spec below makes at
// once: enough for their blocks of --egress-subnets to be seen apart and
// each proxy to refuse a neighbour's host. That the networks take nothing
// of the engine's address pools is what the /29 check proves (a network
// the engine addressed would come from its pools, outside the range);
// that more than those pools hold (29 beside one network) run at once is
// measured by `make bench` (-egress-scale 500, docs/performance.md). Forty
// here took four minutes of the suite on a slow day.
const egressAtScale = 8

// scaleHost is the host name sandbox i alone may reach.
func scaleHost(i int) string { return fmt.Sprintf("h%d.scale.test", i) }

// parallel runs f(0..n-1) on at most width goroutines.
func parallel(n, width int, f func(i int)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, width)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer GinkgoRecover()
			defer func() { <-sem; wg.Done() }()
			f(i)
		}()
	}
	wg.Wait()
}

var _ = Describe("Egress at scale", func() {
	var ctx context.Context
	var ns string
	BeforeEach(func() {
		ctx = context.Background()
		ns = newNamespace(ctx)
	})

	// Under the default runtime only: the sandbox's side of egress is
	// checked under every runtime in "Sandbox egress"; this one is about
	// the engine's address pools and the controller's networks and
	// proxies, which the runtime does not change, and a second run under
	// runsc (passed once by hand: 40 Ready in 40 s, 64 s in all) would
	// add a minute to the suite.
	It("gives sandboxes with egress each a block of --egress-subnets, reaching only their own host, and removes them all", func() {
		By("serving every sandbox's host from a web server of the test's own on the egress network")
		label := "afe.test=egress-scale-" + ns
		web := "afe-envtest-scale-web-" + ns
		DeferCleanup(dockertest.RemoveAll, label)
		args := []string{"run", "-d", "--name", web, "--label", label, "--label", afev1.LabelController + "=" + instance,
			"--network", egressNetwork, "--cap-drop", "ALL", "--cap-add", "NET_BIND_SERVICE"}
		for i := range egressAtScale {
			args = append(args, "--network-alias", scaleHost(i))
		}
		args = append(args, dockertest.TestImage, "sh", "-c", "mkdir -p /www && echo scale-web > /www/index.html && exec httpd -f -p 80 -h /www")
		out, err := exec.Command("docker", args...).CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))

		By(fmt.Sprintf("creating %d sandboxes with egress at once", egressAtScale))
		sandboxes := make([]*afev1.Sandbox, egressAtScale)
		t0 := time.Now()
		for i := range sandboxes {
			sandboxes[i] = newSandbox(ns, fmt.Sprintf("scale-%d", i))
			sandboxes[i].Spec.Egress = []afev1.EgressHost{afev1.EgressHost(scaleHost(i))}
			Expect(k8sClient.Create(ctx, sandboxes[i])).To(Succeed())
		}
		Eventually(func(g Gomega) {
			list := &afev1.SandboxList{}
			g.Expect(k8sClient.List(ctx, list, client.InNamespace(ns))).To(Succeed())
			ready, other := 0, map[string]int{}
			for _, s := range list.Items {
				if meta.IsStatusConditionTrue(s.Status.Conditions, afev1.SandboxReadyCondition) {
					ready++
				} else if c := meta.FindStatusCondition(s.Status.Conditions, afev1.EgressReadyCondition); c != nil {
					other[c.Reason]++
				}
			}
			g.Expect(ready).To(Equal(egressAtScale), "not Ready yet, by EgressReady reason: %v", other)
		}, "5m", "500ms").Should(Succeed())
		GinkgoWriter.Printf("%d sandboxes with egress: creation to all Ready %s\n", egressAtScale, time.Since(t0))

		By("giving each network a /29 of --egress-subnets of its own")
		ranges := mustParseSubnets(subnets.Default)
		seen := map[netip.Prefix]string{}
		for _, sbx := range sandboxes {
			name := naming.Network(naming.Key(ns, sbx.Name))
			out, err := exec.Command("docker", "network", "inspect", "-f", "{{range .IPAM.Config}}{{.Subnet}}{{end}}", name).Output()
			Expect(err).NotTo(HaveOccurred())
			p, err := netip.ParsePrefix(strings.TrimSpace(string(out)))
			Expect(err).NotTo(HaveOccurred())
			Expect(p.Bits()).To(Equal(subnets.BlockBits))
			Expect(ranges[0].Contains(p.Addr())).To(BeTrue(), "%s outside %s", p, ranges[0])
			Expect(seen).NotTo(HaveKey(p), "%s handed to %s and %s", p, seen[p], name)
			seen[p] = name
		}

		By("reaching its own host, and not its neighbour's")
		t1 := time.Now()
		parallel(egressAtScale, 8, func(i int) {
			c := naming.Container(naming.Key(ns, sandboxes[i].Name))
			Eventually(func() (string, error) { return fetch(c, "http://"+scaleHost(i)+"/", true) }, "20s").Should(Equal("scale-web"), c)
			// The refusal is the proxy's 403, which 40 proxies on a loaded
			// machine may take more than fetch's 5 s to send, or not send
			// while they are recreated for a change of the host's addresses.
			expectRefused(func() (string, error) {
				return fetchWithin(c, "http://"+scaleHost((i+1)%egressAtScale)+"/", true, 20)
			})
		})
		GinkgoWriter.Printf("%d sandboxes: own host and neighbour's checked in %s\n", egressAtScale, time.Since(t1))

		By("deleting them all: nothing is left")
		uids := make([]string, len(sandboxes))
		for i, sbx := range sandboxes {
			uids[i] = uidLabel(sbx)
		}
		t2 := time.Now()
		for _, sbx := range sandboxes {
			Expect(k8sClient.Delete(ctx, sbx)).To(Succeed())
		}
		Eventually(func(g Gomega) {
			list := &afev1.SandboxList{}
			g.Expect(k8sClient.List(ctx, list, client.InNamespace(ns))).To(Succeed())
			g.Expect(list.Items).To(BeEmpty())
		}, "3m", "500ms").Should(Succeed())
		GinkgoWriter.Printf("%d sandboxes with egress: deletion to all gone %s\n", egressAtScale, time.Since(t2))
		for _, uid := range uids {
			Expect(dockertest.Objects(uid)).To(BeEmpty(), uid)
		}
	})

	It("removes the proxy and network of a sandbox that dropped egress, whatever its status says", func() {
		By("a sandbox with egress whose env comes from a Secret")
		secret := newSecret(ns, "creds", map[string]string{"k": "v"})
		Expect(k8sClient.Create(ctx, secret)).To(Succeed())
		sbx := newSandbox(ns, "drops-egress")
		sbx.Spec.Egress = []afev1.EgressHost{"allowed.test"}
		sbx.Spec.Env = []afev1.EnvVar{{Name: "T", ValueFrom: &afev1.EnvVarSource{SecretKeyRef: &afev1.SecretKeySelector{Name: "creds", Key: "k"}}}}
		Expect(k8sClient.Create(ctx, sbx)).To(Succeed())
		got := waitReady(ctx, sbx)
		label := uidLabel(sbx)
		proxy, network := got.Status.ProxyName, got.Status.NetworkName

		By("dropping egress while the Secret is missing: the spec is refused, nothing removed yet")
		Expect(k8sClient.Delete(ctx, secret)).To(Succeed())
		Eventually(func(g Gomega) {
			cur := getSandbox(ctx, sbx)(g)
			cur.Spec.Egress = nil
			g.Expect(k8sClient.Update(ctx, cur)).To(Succeed())
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			cur := getSandbox(ctx, sbx)(g)
			g.Expect(cur.Status.ObservedGeneration).To(Equal(cur.Generation))
			c := meta.FindStatusCondition(cur.Status.Conditions, afev1.ContainerReadyCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(afev1.SecretNotFoundReason))
		}).Should(Succeed())
		Expect(dockertest.Objects(label)).To(ContainElements("container/"+proxy, "network/"+network))

		By("the tenant erasing the proxy and network from the status")
		Eventually(func(g Gomega) {
			cur := getSandbox(ctx, sbx)(g)
			cur.Status.ProxyName, cur.Status.ProxyURL, cur.Status.NetworkName = "", "", ""
			g.Expect(k8sClient.Status().Update(ctx, cur)).To(Succeed())
		}).Should(Succeed())

		By("the Secret back: the sandbox is Ready without a network, its proxy and network gone")
		Expect(k8sClient.Create(ctx, newSecret(ns, "creds", map[string]string{"k": "v"}))).To(Succeed())
		Eventually(func(g Gomega) {
			cur := getSandbox(ctx, sbx)(g)
			g.Expect(meta.IsStatusConditionTrue(cur.Status.Conditions, afev1.SandboxReadyCondition)).To(BeTrue())
			g.Expect(dockertest.Objects(label)).To(ConsistOf("container/"+got.Status.ContainerName, "volume/"+got.Status.VolumeName))
		}, "60s").Should(Succeed())
		c, err := dockertest.Inspect(got.Status.ContainerName)
		Expect(err).NotTo(HaveOccurred())
		Expect(c.HostConfig.NetworkMode).To(Equal("none"))
		deleteAndWaitGone(ctx, sbx)
		Expect(dockertest.Objects(label)).To(BeEmpty())
	})
})

// newSecret is a Secret of the namespace with the data.
func newSecret(ns, name string, data map[string]string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, StringData: data}
}
