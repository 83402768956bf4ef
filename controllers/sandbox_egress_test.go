package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/sandboxspec"
	"afe.dev/sandbox/test/dockertest"
)

// inSandbox runs a shell command in the sandbox container as its user.
func inSandbox(container, script string) (string, error) {
	return dockertest.Exec(container, "sh", "-c", script)
}

// fetch asks for url from inside the sandbox, through its proxy or
// straight, within 5 seconds: the body of a 200, or an error with the
// status line (or "no answer").
func fetch(container, url string, viaProxy bool) (string, error) {
	return fetchWithin(container, url, viaProxy, 5)
}

// httpGet is an HTTP/1.0 GET written by the shell to nc, which tells a
// refusal's status line from a fetch's body. stdin stays open until nc
// ends, as squid closes a half-closed client's request. Arguments:
// address, port, request target, Host, seconds.
const httpGet = `f=/tmp/.afe-fetch.$$; cr=$(printf '\r')
{ printf 'GET %s HTTP/1.0\r\nHost: %s\r\n\r\n' "$3" "$4"; sleep "$5" & echo $! > $f.pid; wait; } |
{ timeout "$5" nc "$1" "$2" > $f.out; i=0; until [ -s $f.pid ] || [ $i -ge 100 ]; do sleep 0.01; i=$((i+1)); done; kill $(cat $f.pid 2>/dev/null) 2>/dev/null; true; }
status=$(head -n 1 $f.out | tr -d "$cr")
case "$status" in
"HTTP/1."?" 200 "*) sed "1,/^$cr\$/d" $f.out; rc=0 ;;
*) echo "${status:-no answer}"; rc=1 ;;
esac
rm -f $f.pid $f.out; exit $rc`

// expectRefused checks that the proxy refuses a request (a 403), asking
// again for up to 30 s while it gives no answer (a proxy being recreated
// when the engine host's addresses change, as other specs make networks)
// and failing at once on a success.
func expectRefused(request func() (string, error)) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		out, err := request()
		if err == nil {
			StopTrying("the proxy let it through: " + out).Now()
		}
		g.Expect(out).To(ContainSubstring("403"))
	}, "30s", "500ms").Should(Succeed())
}

func fetchWithin(container, url string, viaProxy bool, seconds int) (string, error) {
	rest, ok := strings.CutPrefix(url, "http://")
	ExpectWithOffset(1, ok).To(BeTrue(), "an http:// URL: %s", url)
	host, path, _ := strings.Cut(rest, "/")
	addr, port, err := net.SplitHostPort(host)
	if err != nil {
		addr, port = host, "80"
	}
	target := "/" + path
	if viaProxy {
		addr, port, target = sandboxspec.ProxyAlias, sandboxspec.ProxyPort, url
	}
	return dockertest.Exec(container, "sh", "-c", httpGet, "fetch", addr, port, target, host, strconv.Itoa(seconds))
}

// loopbackDNSLookup looks name up in the sandbox while a listener of the
// sandbox's own user waits for one datagram on 127.0.0.1:53 of its network
// (the engine lets a runc container's processes bind low ports; gVisor's
// kernel binds in its own network stack), and returns what the listener
// saw and the lookup's error.
func loopbackDNSLookup(container, name string) (string, error) {
	return inSandbox(container, "afe-udpsink -wait 8s > /tmp/sink & i=0; until grep -q listening /tmp/sink || [ $i -ge 100 ]; do sleep 0.05; i=$((i+1)); done; "+
		"timeout 3 nslookup "+name+"; rc=$?; wait; cat /tmp/sink; exit $rc")
}

var _ = Describe("Sandbox egress", func() {
	var ctx context.Context
	var ns string
	BeforeEach(func() {
		ctx = context.Background()
		ns = newNamespace(ctx)
	})

	// The sandbox's side of egress under each runtime: gVisor's own
	// network stack writes its packets to the container's own network
	// namespace, so the same walls must hold.
	forEachRuntime(func(runtime string) {
		It("reaches exactly the allowed hosts, through its own proxy, and nothing else", func() {
			sbx := newSandbox(ns, "egress")
			sbx.Spec.Runtime = runtime
			sbx.Spec.Egress = []afev1.EgressHost{"allowed.test"}
			t0 := time.Now()
			Expect(k8sClient.Create(ctx, sbx)).To(Succeed())
			got := waitReady(ctx, sbx)
			GinkgoWriter.Printf("sandbox with egress: creation to Ready %s\n", time.Since(t0))
			label := uidLabel(sbx)
			name := got.Status.ContainerName

			By("reporting the topology in the status")
			Expect(got.Status.Runtime).To(Equal(runtime))
			Expect(got.Status.NetworkName).To(Equal("afe-" + ns + ".egress_net"))
			Expect(got.Status.ProxyName).To(Equal("afe-" + ns + ".egress_proxy"))
			Expect(got.Status.ProxyURL).To(Equal("http://afe-proxy:3128"))
			Expect(dockertest.Objects(label)).To(ConsistOf(
				"container/"+name, "container/"+got.Status.ProxyName, "volume/"+got.Status.VolumeName, "network/"+got.Status.NetworkName))

			By("placing the sandbox on the internal network only, with the proxy variables")
			c, err := dockertest.Inspect(name)
			Expect(err).NotTo(HaveOccurred())
			Expect(c.HostConfig.NetworkMode).To(Equal(got.Status.NetworkName))
			Expect(c.NetworkSettings.Networks).To(HaveLen(1))
			Expect(c.NetworkSettings.Networks).To(HaveKey(got.Status.NetworkName))
			Expect(c.Config.Env).To(ContainElements("HTTP_PROXY=http://afe-proxy:3128", "https_proxy=http://afe-proxy:3128"))
			Expect(c.HostConfig.CapDrop).To(Equal([]string{"ALL"}))
			Expect(dockertest.NetworkInternal(got.Status.NetworkName)).To(BeTrue())

			By("hardening the proxy")
			p, err := dockertest.Inspect(got.Status.ProxyName)
			Expect(err).NotTo(HaveOccurred())
			Expect(p.Config.User).To(Equal("proxy"))
			Expect(p.HostConfig.CapDrop).To(Equal([]string{"ALL"}))
			Expect(p.HostConfig.SecurityOpt).To(ContainElement("no-new-privileges:true"))
			Expect(p.HostConfig.ReadonlyRootfs).To(BeTrue())
			Expect(p.HostConfig.Memory).To(BeNumerically(">", 0))
			Expect(*p.HostConfig.PidsLimit).To(BeNumerically(">", 0))
			Expect(p.NetworkSettings.Networks).To(HaveKey(got.Status.NetworkName))
			Expect(p.NetworkSettings.Networks).To(HaveKey(egressNetwork))
			Expect(p.Config.Labels).To(HaveKeyWithValue(afev1.LabelRole, afev1.RoleProxy))
			By("running the sandbox under the sandbox's runtime, its proxy under runc")
			Expect(engineRuntime(name)).To(Equal(runtime))
			Expect(engineRuntime(got.Status.ProxyName)).To(Equal("runc"))

			By("handing the network of neither container to the host's kernel")
			for _, ctr := range []string{name, got.Status.ProxyName} {
				Expect(runtimeArgs(engineRuntime(ctr))).NotTo(ContainElement(MatchRegexp(`^-?-network(=host)?$`)), ctr)
				Expect(dockertest.Inspect(ctr)).To(HaveField("HostConfig.NetworkMode", Not(Equal("host"))), ctr)
			}

			By("naming the proxy in the sandbox's /etc/hosts, at its fixed address, not through the engine's DNS")
			proxyIP := p.NetworkSettings.Networks[got.Status.NetworkName].IPAddress
			Expect(proxyIP).NotTo(BeEmpty())
			Expect(c.HostConfig.ExtraHosts).To(Equal([]string{"afe-proxy:" + proxyIP}))
			Expect(dockertest.ContainerIP(name, got.Status.NetworkName)).To(Equal(sandboxspec.SandboxAddress(proxyIP)), "both addresses fixed")
			Expect(inSandbox(name, "grep afe-proxy /etc/hosts")).To(MatchRegexp(`^` + regexp.QuoteMeta(proxyIP) + `\s+afe-proxy$`))

			By("fetching an allowed host through the proxy")
			Expect(fetch(name, "http://allowed.test/", true)).To(Equal("hello-from-test-web"))
			By("fetching it with busybox wget, which reads its answer with a blocking read(2), as a new user would")
			Eventually(func() (string, error) {
				return inSandbox(name, "timeout 5 wget -q -O- http://allowed.test/")
			}, "30s").Should(Equal("hello-from-test-web"))

			By("a blocking read of a socket waits for a late answer")
			// busybox wget reads the answer of a server on the sandbox's own
			// loopback that answers a second late (Debian's runsc of 2022,
			// with the host's network, returned EAGAIN there).
			out, err := inSandbox(name, `unset http_proxy HTTP_PROXY; cr=$(printf '\r')
				nc -l -p 8080 -e sh -c "while read -r l && [ \"\$l\" != \"$cr\" ]; do :; done; sleep 1; printf 'HTTP/1.0 200 OK\r\n\r\nlate answer'" &
				sleep 0.3; timeout 5 wget -q -O- http://127.0.0.1:8080/; rc=$?; kill $! 2>/dev/null; exit $rc`)
			Expect(err).NotTo(HaveOccurred(), out)
			Expect(out).To(Equal("late answer"))

			By("refusing a host that is not listed")
			expectRefused(func() (string, error) { return fetch(name, "http://denied.test/", true) })
			By("refusing a subdomain of a host listed without a leading dot")
			_, err = fetch(name, "http://other.allowed.test/", true)
			Expect(err).To(HaveOccurred())

			By("allowing CONNECT to 443 only")
			// nc ends a second after its input: a loaded machine may need another try.
			Eventually(func(g Gomega) {
				out, err := inSandbox(name, `(printf 'CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n'; sleep 0.5; printf 'GET / HTTP/1.0\r\nHost: allowed.test\r\n\r\n'; sleep 1) | timeout 5 nc afe-proxy 3128`)
				g.Expect(err).NotTo(HaveOccurred(), out)
				g.Expect(out).To(ContainSubstring("200 Connection established"))
				g.Expect(out).To(ContainSubstring("hello-from-test-web"))
			}, "30s").Should(Succeed())
			expectRefused(func() (string, error) {
				out, _ := inSandbox(name, `printf 'CONNECT allowed.test:80 HTTP/1.1\r\nHost: allowed.test:80\r\n\r\n' | timeout 5 nc afe-proxy 3128`)
				if strings.Contains(out, " 200 ") {
					return out, nil
				}
				return out, errors.New("refused")
			})

			By("having no direct route to the server")
			webIP := dockertest.ContainerIP(testWeb+"-"+instance, egressNetwork)
			Expect(webIP).NotTo(BeEmpty())
			_, err = fetch(name, "http://"+webIP+"/", false)
			Expect(err).To(HaveOccurred())

			By("not resolving names through DNS")
			Expect(c.HostConfig.Dns).To(Equal([]string{"127.0.0.1"}))
			_, err = inSandbox(name, "timeout 5 nslookup allowed.test")
			Expect(err).To(HaveOccurred())
			// The engine's resolver forwards the lookup of an external name to
			// the sandbox's own loopback, and nowhere else: a listener there
			// receives it, and the lookup fails.
			// Under gVisor's own network stack the engine's resolver
			// (127.0.0.11 of the container's namespace) is out of reach
			// too: the lookup stays in the sandbox's kernel, and nothing
			// reaches the namespace's loopback.
			sink, err := loopbackDNSLookup(name, "example.com")
			Expect(err).To(HaveOccurred(), sink)
			if userSpaceKernel(runtime) {
				Expect(sink).To(ContainSubstring("no datagram"))
			} else {
				Expect(sink).To(ContainSubstring("datagram from 127.0.0.1:"))
				Expect(sink).To(ContainSubstring("for example.com"))
			}

			By("not reaching a service listening on all the host's interfaces")
			port := hostService.Addr().(*net.TCPAddr).Port
			hostAddrs := dockertest.HostAddresses()
			Expect(hostAddrs).NotTo(BeEmpty())
			// The control: the service answers a container of an ordinary
			// network (the test's web server) at its network's gateway.
			gw, err := exec.Command("docker", "network", "inspect", "-f", "{{range .IPAM.Config}}{{.Gateway}}{{end}}", egressNetwork).Output()
			Expect(err).NotTo(HaveOccurred())
			Expect(strings.TrimSpace(string(gw))).NotTo(BeEmpty())
			control, err := exec.Command("docker", "exec", testWeb+"-"+instance, "timeout", "5", "wget", "-q", "-O-",
				fmt.Sprintf("http://%s:%d/", strings.TrimSpace(string(gw)), port)).CombinedOutput()
			Expect(err).NotTo(HaveOccurred(), string(control))
			Expect(string(control)).To(ContainSubstring("host-secret"), "the host service answers a container that is not a sandbox")
			for _, gw := range hostAddrs {
				url := fmt.Sprintf("http://%s:%d/", gw, port)
				out, err := fetch(name, url, false)
				Expect(err).To(HaveOccurred(), "direct %s: %s", url, out)
				out, err = fetch(name, url, true)
				Expect(err).To(HaveOccurred(), "through the proxy %s: %s", url, out)
				Expect(out).NotTo(ContainSubstring("host-secret"))
			}
			// A name resolving to the host is refused by address: the proxy
			// denies its network's gateway (the rule itself is tested on the
			// image, with a name on port 80: TestProxyImageRefusesTheHostByItsGateway).
			Expect(proxyDenyIPs(got.Status.ProxyName)).To(ContainElement(strings.TrimSpace(string(gw))))

			By("changing egress: the proxy is given the allowlist in place, the sandbox container kept")
			before := meta.FindStatusCondition(got.Status.Conditions, afev1.EgressReadyCondition).Message
			setEgress := func(hosts ...afev1.EgressHost) time.Time {
				Eventually(func(g Gomega) {
					cur := getSandbox(ctx, sbx)(g)
					cur.Spec.Egress = hosts
					g.Expect(k8sClient.Update(ctx, cur)).To(Succeed())
				}).Should(Succeed())
				return time.Now()
			}
			written := setEgress("allowed.test", "denied.test")
			Eventually(func() (string, error) { return fetchWithin(name, "http://denied.test/", true, 1) }).Should(Equal("hello-from-test-web"))
			GinkgoWriter.Printf("an added host reachable %s after the write\n", time.Since(written))
			Eventually(func(g Gomega) {
				cur := getSandbox(ctx, sbx)(g)
				c := meta.FindStatusCondition(cur.Status.Conditions, afev1.EgressReadyCondition)
				g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
				g.Expect(c.Message).To(ContainSubstring("denied.test"))
				g.Expect(c.Message).To(MatchRegexp(`\(allowlist [0-9a-f]+\)`))
				g.Expect(c.Message).NotTo(Equal(before))
			}).Should(Succeed())
			Expect(getSandbox(ctx, sbx)(Default).Status.ContainerID).To(Equal(got.Status.ContainerID))
			same, err := dockertest.Inspect(got.Status.ProxyName)
			Expect(err).NotTo(HaveOccurred())
			Expect(same.ID).To(Equal(p.ID), "the proxy was recreated for an allowlist change")
			Expect(same.State.StartedAt).To(Equal(p.State.StartedAt), "the proxy was restarted for an allowlist change")
			By("keeping a download in flight from a host still allowed, and refusing the removed host at once")
			download := make(chan string, 1)
			go func() {
				defer GinkgoRecover()
				out, err := fetchWithin(name, "http://allowed.test/cgi-bin/slow?"+ns, true, 60)
				Expect(err).NotTo(HaveOccurred(), out)
				download <- out
			}()
			Eventually(func() error {
				return exec.Command("docker", "exec", testWeb+"-"+instance, "test", "-e", "/tmp/slow."+ns).Run()
			}).Should(Succeed(), "the download started")
			written = setEgress("allowed.test")
			Eventually(func() string {
				out, _ := fetchWithin(name, "http://denied.test/", true, 1)
				return out
			}).Should(ContainSubstring("403"))
			refused := time.Since(written)
			GinkgoWriter.Printf("a removed host refused %s after the write\n", refused)
			// The bound is generous (the figure is in docs/egress.md): the
			// time includes an exec in the sandbox on a loaded machine.
			Expect(refused).To(BeNumerically("<", 15*time.Second))
			Eventually(download).Should(Receive(HaveSuffix("chunk-5\nchunk-6\ndone")), "the download ran on, whole")
			same, err = dockertest.Inspect(got.Status.ProxyName)
			Expect(err).NotTo(HaveOccurred())
			Expect(same.ID).To(Equal(p.ID), "the proxy was recreated for an allowlist change")

			By("recreating, with the new allowlist, a proxy that cannot take it in place")
			// With a pid file that names no process the reload exec cannot
			// tell squid and fails; the proxy keeps admitting the old
			// allowlist meanwhile.
			_, err = dockertest.Exec(got.Status.ProxyName, "sh", "-c", "echo 999999 > /tmp/squid.pid")
			Expect(err).NotTo(HaveOccurred())
			setEgress("allowed.test", "denied.test")
			Eventually(func() (string, error) { return fetchWithin(name, "http://denied.test/", true, 1) }).Should(Equal("hello-from-test-web"))
			same, err = dockertest.Inspect(got.Status.ProxyName)
			Expect(err).NotTo(HaveOccurred())
			Expect(same.ID).NotTo(Equal(p.ID), "a proxy that could not take the allowlist was kept")
			Expect(getSandbox(ctx, sbx)(Default).Status.ContainerID).To(Equal(got.Status.ContainerID))
			setEgress("allowed.test")
			Eventually(func() string {
				out, _ := fetchWithin(name, "http://denied.test/", true, 1)
				return out
			}).Should(ContainSubstring("403"))

			By("recreating a proxy killed by hand, for the same sandbox container")
			killed := time.Now()
			Expect(dockertest.RemoveContainer(got.Status.ProxyName)).To(Succeed())
			Eventually(func() (string, error) { return fetchWithin(name, "http://allowed.test/", true, 1) }, "30s").Should(Equal("hello-from-test-web"))
			GinkgoWriter.Printf("proxy removed by hand: fetching again after %s\n", time.Since(killed))
			cur := getSandbox(ctx, sbx)(Default)
			Expect(cur.Status.ContainerID).To(Equal(got.Status.ContainerID))
			Expect(cur.Status.Recreations).To(BeZero())

			By("removing egress: the sandbox loses its network, proxy and network go")
			Eventually(func(g Gomega) {
				cur := getSandbox(ctx, sbx)(g)
				cur.Spec.Egress = nil
				g.Expect(k8sClient.Update(ctx, cur)).To(Succeed())
			}).Should(Succeed())
			Eventually(func(g Gomega) {
				cur := getSandbox(ctx, sbx)(g)
				g.Expect(cur.Status.Phase).To(Equal(afev1.SandboxReady))
				g.Expect(cur.Status.ObservedGeneration).To(Equal(cur.Generation))
				g.Expect(cur.Status.NetworkName).To(BeEmpty())
				g.Expect(dockertest.Objects(label)).To(ConsistOf("container/"+name, "volume/"+got.Status.VolumeName))
			}).Should(Succeed())
			c, err = dockertest.Inspect(name)
			Expect(err).NotTo(HaveOccurred())
			Expect(c.HostConfig.NetworkMode).To(Equal("none"))

			By("deleting: nothing is left")
			Eventually(func(g Gomega) {
				cur := getSandbox(ctx, sbx)(g)
				cur.Spec.Egress = []afev1.EgressHost{"allowed.test"}
				g.Expect(k8sClient.Update(ctx, cur)).To(Succeed())
			}).Should(Succeed())
			waitCondition(ctx, sbx, afev1.EgressReadyCondition, metav1.ConditionTrue, afev1.ReadyReason)
			deleteAndWaitGone(ctx, sbx)
			Expect(dockertest.Objects(label)).To(BeEmpty())
		})
	})

	// Serial: the networks it makes change the list of every manager on
	// the engine, which recreates their proxies.
	It("refuses the engine host's addresses on every network, kept current as networks come and go", Serial, func() {
		// Networks of the test's own standing in for docker0: one there
		// before the sandbox, one made after it is Ready.
		labels := afev1.LabelController + "=" + instance
		first := fmt.Sprintf("afe-envtest-hostaddr-%d-a", os.Getpid())
		second := fmt.Sprintf("afe-envtest-hostaddr-%d-b", os.Getpid())
		out, err := exec.Command("docker", "network", "create", "--label", labels, first).CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
		DeferCleanup(func() { _ = exec.Command("docker", "network", "rm", first, second).Run() })
		gateway := func(network string) string {
			out, err := exec.Command("docker", "network", "inspect", "-f", "{{range .IPAM.Config}}{{.Gateway}}{{end}}", network).Output()
			Expect(err).NotTo(HaveOccurred())
			Expect(strings.TrimSpace(string(out))).NotTo(BeEmpty())
			return strings.TrimSpace(string(out))
		}
		firstGW, egressGW := gateway(first), gateway(egressNetwork)

		sbx := newSandbox(ns, "hostaddrs")
		sbx.Spec.Egress = []afev1.EgressHost{"allowed.test"}
		Expect(k8sClient.Create(ctx, sbx)).To(Succeed())
		got := waitReady(ctx, sbx)
		container := got.Status.ContainerID

		By("refusing every bridge's gateway with private addresses allowed, not only the egress network's")
		// The network came a moment before the sandbox: its proxy may have
		// been made with the list of before, and is made again with it.
		Eventually(func() []string { return proxyDenyIPs(got.Status.ProxyName) }, "30s").Should(ContainElements(egressGW, firstGW))
		deny := proxyDenyIPs(got.Status.ProxyName)
		if out, _ := exec.Command("docker", "network", "inspect", "-f", "{{range .IPAM.Config}}{{.Gateway}}{{end}}", got.Status.NetworkName).Output(); len(strings.TrimSpace(string(out))) > 0 {
			Expect(deny).NotTo(ContainElement(strings.TrimSpace(string(out))), "the sandbox's own network gives the host no address")
		}
		By("and, the engine being local to this process, the host's own addresses")
		// Other processes' networks come and go meanwhile: the two are
		// compared until they agree.
		Eventually(func(g Gomega) {
			deny := proxyDenyIPs(got.Status.ProxyName)
			local, err := net.InterfaceAddrs()
			g.Expect(err).NotTo(HaveOccurred())
			for _, a := range local {
				ip := a.(*net.IPNet).IP
				if ip.To4() == nil && ip.IsLinkLocalUnicast() {
					g.Expect(deny).To(ContainElement("fe80::/10"))
					continue
				}
				g.Expect(deny).To(ContainElement(ip.String()))
			}
		}, "30s").Should(Succeed())

		By("giving the proxy, in place, a network that came after it; the sandbox container kept")
		proxy, err := dockertest.Inspect(got.Status.ProxyName)
		Expect(err).NotTo(HaveOccurred())
		out, err = exec.Command("docker", "network", "create", "--label", labels, second).CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
		newGW := gateway(second)
		t0 := time.Now()
		Eventually(func() []string { return proxyDenyIPs(got.Status.ProxyName) }, "30s").Should(ContainElement(newGW))
		GinkgoWriter.Printf("a new network's gateway in the proxy's list after %s\n", time.Since(t0))
		Eventually(func() (string, error) { return fetch(got.Status.ContainerName, "http://allowed.test/", true) }).Should(Equal("hello-from-test-web"))
		Expect(getSandbox(ctx, sbx)(Default).Status.ContainerID).To(Equal(container))

		By("keeping the proxy, and its connections, when a network goes")
		Expect(exec.Command("docker", "network", "rm", second).Run()).To(Succeed())
		Consistently(func(g Gomega) {
			now, err := dockertest.Inspect(got.Status.ProxyName)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(now.ID).To(Equal(proxy.ID))
		}, "5s").Should(Succeed())
		Expect(proxyDenyIPs(got.Status.ProxyName)).To(ContainElements(egressGW, firstGW, newGW))
		Eventually(func() (string, error) { return fetch(got.Status.ContainerName, "http://allowed.test/", true) }).Should(Equal("hello-from-test-web"))
		now, err := dockertest.Inspect(got.Status.ProxyName)
		Expect(err).NotTo(HaveOccurred())
		Expect(now.ID).To(Equal(proxy.ID), "the proxy was recreated for a change of the host's addresses")
	})

	It("refuses malformed egress entries at admission", func() {
		for _, entry := range []string{
			"10.0.0.1", "::1", "[::1]", "example.com:443", "https://example.com", "example.com/path",
			"*.example.com", "ex*ample.com", " example.com", "example.com ", "exa mple.com",
			"allowed.test\nhttp_access allow all", "example..com", ".com", "a", "EXAMPLE.com",
			strings.Repeat("a", 64) + ".com", strings.Repeat("abcdefghi.", 26) + "com", "example.com.", "-example.com",
		} {
			sbx := newSandbox(ns, "bad-egress")
			sbx.Spec.Egress = []afev1.EgressHost{afev1.EgressHost(entry)}
			err := k8sClient.Create(ctx, sbx)
			Expect(err).To(HaveOccurred(), "entry %q was admitted", entry)
			Expect(err.Error()).To(ContainSubstring("spec.egress"), "entry %q", entry)
		}
		sbx := newSandbox(ns, "too-many")
		for i := 0; i < 65; i++ {
			sbx.Spec.Egress = append(sbx.Spec.Egress, afev1.EgressHost(fmt.Sprintf("h%d.example.com", i)))
		}
		Expect(k8sClient.Create(ctx, sbx)).NotTo(Succeed())
	})
})

// proxyDenyIPs is the list of addresses the running squid of the proxy
// refuses, read from the configuration it runs with (the allowlist changes
// in place: the container's environment is its creation's).
func proxyDenyIPs(name string) []string {
	out, err := exec.Command("docker", "exec", name, "cat", "/tmp/squid.conf").Output()
	if err != nil {
		return nil
	}
	// The entrypoint writes a list ACL one entry a line (squid ORs them).
	var ips []string
	for _, l := range strings.Split(string(out), "\n") {
		if list, ok := strings.CutPrefix(l, "acl afe_host dst "); ok {
			ips = append(ips, strings.Fields(list)...)
		}
	}
	return ips
}

// engineRuntime is the OCI runtime the engine runs the container under.
// runtimeArgs are the arguments the engine gives the runtime (its
// daemon.json's runtimeArgs).
func runtimeArgs(runtime string) []string {
	out, err := exec.Command("docker", "info", "--format", "{{json .Runtimes}}").Output()
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	var runtimes map[string]struct {
		Args []string `json:"runtimeArgs"`
	}
	ExpectWithOffset(1, json.Unmarshal(out, &runtimes)).To(Succeed())
	if runtime == "" {
		runtime = "runc"
	}
	ExpectWithOffset(1, runtimes).To(HaveKey(runtime))
	return runtimes[runtime].Args
}

func engineRuntime(name string) string {
	out, err := exec.Command("docker", "inspect", "-f", "{{.HostConfig.Runtime}}", name).Output()
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return strings.TrimSpace(string(out))
}
