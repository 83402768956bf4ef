package controllers

import (
	"context"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/test/dockertest"
)

// From inside running sandboxes: no capability, no privilege gain, nothing
// of the host but the workspace, and no way to other sandboxes.
var _ = Describe("Escape checks", func() {
	It("finds no way out of a sandbox", func() {
		ctx := context.Background()
		ns := newNamespace(ctx)
		plain := newSandbox(ns, "plain")
		a, b := newSandbox(ns, "a"), newSandbox(ns, "b")
		a.Spec.Egress = []afev1.EgressHost{"allowed.test"}
		b.Spec.Egress = []afev1.EgressHost{"allowed.test"}
		for _, s := range []*afev1.Sandbox{plain, a, b} {
			Expect(k8sClient.Create(ctx, s)).To(Succeed())
		}
		plain, a, b = waitReady(ctx, plain), waitReady(ctx, a), waitReady(ctx, b)
		defer func() {
			for _, s := range []*afev1.Sandbox{plain, a, b} {
				deleteAndWaitGone(ctx, s)
			}
		}()
		in := func(s *afev1.Sandbox, script string) (string, error) {
			return inSandbox(s.Status.ContainerName, script)
		}

		By("having no capability, in any set")
		out, err := in(plain, "grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb)' /proc/self/status")
		Expect(err).NotTo(HaveOccurred())
		for _, line := range strings.Split(out, "\n") {
			Expect(line).To(HaveSuffix("0000000000000000"), line)
		}

		By("gaining nothing from a setuid-root binary")
		out, err = in(plain, "ls -l /opt/suid/euid; /opt/suid/euid")
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(ContainSubstring("-rwsr-xr-x"))
		Expect(out).To(HaveSuffix("\n1000"))
		out, _ = in(plain, "grep NoNewPrivs /proc/self/status")
		Expect(out).To(HaveSuffix("1"))

		By("seeing no Docker socket and no host path but the workspace")
		_, err = in(plain, "ls /var/run/docker.sock /run/docker.sock")
		Expect(err).To(HaveOccurred())
		out, err = in(plain, "cat /proc/self/mountinfo")
		Expect(err).NotTo(HaveOccurred())
		for _, line := range strings.Split(out, "\n") {
			fields := strings.Fields(line)
			if len(fields) < 5 {
				continue
			}
			target := fields[4]
			switch {
			case target == "/", target == "/workspace",
				strings.HasPrefix(target, "/proc"), strings.HasPrefix(target, "/sys"), strings.HasPrefix(target, "/dev"),
				target == "/etc/resolv.conf", target == "/etc/hostname", target == "/etc/hosts", target == "/sbin/docker-init":
			default:
				Fail("unexpected mount at " + target + ": " + line)
			}
		}

		By("having no network at all without egress")
		out, err = in(plain, "cat /proc/net/dev | tail -n +3 | cut -d: -f1")
		Expect(err).NotTo(HaveOccurred())
		Expect(strings.Fields(out)).To(Equal([]string{"lo"}))

		By("not reaching another sandbox or its proxy")
		// probe asks for an HTTP answer: it succeeds only when the target
		// is reachable and answers (squid does, on its own network).
		probe := func(ip, port string) (string, error) {
			return in(a, `printf 'GET / HTTP/1.0\r\n\r\n' | timeout 3 nc `+ip+" "+port)
		}
		aProxyIP := dockertest.ContainerIP(a.Status.ProxyName, a.Status.NetworkName)
		out, err = probe(aProxyIP, "3128")
		Expect(err).NotTo(HaveOccurred(), "the probe works against a's own proxy: %s", out)
		Expect(out).To(HavePrefix("HTTP/"))
		bIP := dockertest.ContainerIP(b.Status.ContainerName, b.Status.NetworkName)
		bProxyIP := dockertest.ContainerIP(b.Status.ProxyName, b.Status.NetworkName)
		Expect(bIP).NotTo(BeEmpty())
		Expect(bProxyIP).NotTo(BeEmpty())
		for _, target := range [][2]string{{bProxyIP, "3128"}, {bIP, "3128"}, {bIP, "80"}} {
			out, err := probe(target[0], target[1])
			Expect(err).To(HaveOccurred(), "sandbox a reached %s:%s: %s", target[0], target[1], out)
			Expect(out).NotTo(ContainSubstring("HTTP/"))
		}
		// b's proxy alias is not b's: a resolves afe-proxy to its own proxy.
		out, err = in(a, "nslookup afe-proxy 2>/dev/null | grep -A1 'Name:' | tail -1")
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(ContainSubstring(aProxyIP))
		Expect(out).NotTo(ContainSubstring(bProxyIP))
	})
})
