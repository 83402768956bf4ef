package controllers

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/test/dockertest"
)

// mount is a line of /proc/self/mountinfo: where, what of its filesystem,
// and the filesystem's type.
type mount struct{ root, target, fstype string }

func parseMountinfo(line string) (mount, bool) {
	f := strings.Fields(line)
	sep := slices.Index(f, "-")
	if len(f) < 5 || sep < 0 || sep+1 >= len(f) {
		return mount{}, false
	}
	return mount{root: f[3], target: f[4], fstype: f[sep+1]}, true
}

// From inside running sandboxes: no capability, no privilege gain, nothing
// of the host but the workspace, and no way to other sandboxes.
var _ = Describe("Escape checks", func() {
	It("finds no way out of a sandbox", func() {
		ctx := context.Background()
		ns := newNamespace(ctx)
		plain := newSandbox(ns, "plain")
		plain.Spec.User = "1000:1000" // as the control below
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
		out, err = in(plain, "stat -c '%u %a' /opt/suid/euid; /opt/suid/euid")
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(HavePrefix("0 4755\n"), "the binary is setuid and owned by root")
		Expect(out).To(HaveSuffix("\n1000"))
		out, _ = in(plain, "grep NoNewPrivs /proc/self/status")
		Expect(out).To(HaveSuffix("1"))
		// The control: the same binary, user and image without
		// no-new-privileges becomes root, so the 1000 above is the
		// sandbox's doing.
		control, err := exec.Command("docker", "run", "--rm", "--label", afev1.LabelController+"="+instance,
			"--network", "none", "--user", "1000:1000", dockertest.TestImage, "/opt/suid/euid").CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(control))
		Expect(strings.TrimSpace(string(control))).To(Equal("0"))

		By("seeing no Docker socket and no host path but the workspace")
		_, err = in(plain, "ls /var/run/docker.sock /run/docker.sock")
		Expect(err).To(HaveOccurred())
		out, err = in(plain, "cat /proc/self/mountinfo")
		Expect(err).NotTo(HaveOccurred())
		workspace := false
		for _, line := range strings.Split(out, "\n") {
			m, ok := parseMountinfo(line)
			if !ok {
				continue
			}
			under := func(dir string) bool { return m.target == dir || strings.HasPrefix(m.target, dir+"/") }
			kernel := func(types ...string) bool { return slices.Contains(types, m.fstype) }
			switch {
			case m.target == "/":
			case m.target == "/workspace":
				// The sandbox's own volume, nothing else of the host.
				Expect(m.root).To(HaveSuffix("/volumes/"+plain.Status.VolumeName+"/_data"), line)
				workspace = true
			case m.target == "/etc/resolv.conf", m.target == "/etc/hostname", m.target == "/etc/hosts":
				Expect(m.root).To(ContainSubstring("/containers/"+plain.Status.ContainerID+"/"), line)
			case m.target == "/sbin/docker-init":
				Expect(m.root).To(MatchRegexp(`/(docker-init|tini[^/]*)$`), line)
			case under("/proc"):
				Expect(kernel("proc", "tmpfs")).To(BeTrue(), "a %s mount at %s: %s", m.fstype, m.target, line)
			case under("/sys"):
				Expect(kernel("sysfs", "tmpfs", "cgroup", "cgroup2")).To(BeTrue(), "a %s mount at %s: %s", m.fstype, m.target, line)
			case under("/dev"):
				Expect(kernel("tmpfs", "devpts", "mqueue")).To(BeTrue(), "a %s mount at %s: %s", m.fstype, m.target, line)
			default:
				Fail("unexpected mount at " + m.target + ": " + line)
			}
		}
		Expect(workspace).To(BeTrue(), "the workspace is mounted")

		By("having an IPC namespace of its own")
		hostIPC, err := os.Readlink("/proc/self/ns/ipc")
		Expect(err).NotTo(HaveOccurred())
		ipcOf := func(s *afev1.Sandbox) string {
			out, err := in(s, "readlink /proc/self/ns/ipc")
			Expect(err).NotTo(HaveOccurred())
			Expect(out).To(HavePrefix("ipc:["))
			return out
		}
		Expect(map[string]bool{ipcOf(plain): true, ipcOf(a): true, ipcOf(b): true, hostIPC: true}).To(HaveLen(4),
			"each sandbox has its own IPC namespace, not the host's nor another's")
		mode, err := exec.Command("docker", "inspect", "-f", "{{.HostConfig.IpcMode}}", plain.Status.ContainerName).Output()
		Expect(err).NotTo(HaveOccurred())
		Expect(strings.TrimSpace(string(mode))).To(Equal("private"), "no other container may join it")

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
		// A listener in b, which b itself reaches at its address: a probe
		// from a that fails is then a boundary, not an empty port.
		listen, err := exec.Command("docker", "exec", "-d", b.Status.ContainerName, "sh", "-c",
			`while :; do printf 'HTTP/1.0 200 OK\r\n\r\nfrom b' | nc -l -p 8080; done`).CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(listen))
		Eventually(func() string {
			out, _ := in(b, `printf 'GET / HTTP/1.0\r\n\r\n' | timeout 3 nc `+bIP+" 8080")
			return out
		}, "10s").Should(ContainSubstring("from b"), "b reaches its own listener")
		for _, target := range [][2]string{{bProxyIP, "3128"}, {bIP, "8080"}, {bIP, "3128"}, {bIP, "80"}} {
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
