package controllers

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
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
	forEachRuntime(func(runtime string) {
		It("finds no way out of a sandbox", func() {
			ctx := context.Background()
			ns := newNamespace(ctx)
			gvisor := userSpaceKernel(runtime)
			plain := newSandbox(ns, "plain")
			plain.Spec.User = "1000:1000" // as the control below
			a, b := newSandbox(ns, "a"), newSandbox(ns, "b")
			a.Spec.Egress = []afev1.EgressHost{"allowed.test"}
			b.Spec.Egress = []afev1.EgressHost{"allowed.test"}
			for _, s := range []*afev1.Sandbox{plain, a, b} {
				s.Spec.Runtime = runtime
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
			sets := strings.Split(out, "\n")
			for _, line := range sets {
				Expect(line).To(HaveSuffix("0000000000000000"), line)
			}
			Expect(sets).To(HaveLen(5), out)

			By("gaining nothing from a setuid-root binary")
			out, err = in(plain, "stat -c '%u %a' /opt/suid/euid; /opt/suid/euid")
			Expect(err).NotTo(HaveOccurred())
			Expect(out).To(HavePrefix("0 4755\n"), "the binary is setuid and owned by root")
			Expect(out).To(HaveSuffix("\n1000"))
			out, _ = in(plain, "grep NoNewPrivs /proc/self/status")
			secOpt, err := exec.Command("docker", "inspect", "-f", "{{.HostConfig.SecurityOpt}}", plain.Status.ContainerName).Output()
			Expect(err).NotTo(HaveOccurred())
			Expect(string(secOpt)).To(ContainSubstring("no-new-privileges"))
			Expect(out).To(HaveSuffix("1"))
			if gvisor {
				// The host process that runs the sandbox (gVisor's kernel,
				// the container's process for the engine) has it too.
				Expect(hostStatus(plain.Status.ContainerName, "NoNewPrivs")).To(Equal("1"))
			}
			// The control: the same binary, user, image and runtime without
			// no-new-privileges becomes root under runc, so the 1000 above is
			// the sandbox's doing. gVisor does not honour the
			// setuid bit of this image at all (its current build included): its
			// control stays 1000.
			control, err := exec.Command("docker", "run", "--rm", "--label", afev1.LabelController+"="+instance, "--runtime", runtime,
				"--network", "none", "--user", "1000:1000", dockertest.TestImage, "/opt/suid/euid").CombinedOutput()
			Expect(err).NotTo(HaveOccurred(), string(control))
			if gvisor {
				Expect(strings.TrimSpace(string(control))).To(Equal("1000"))
			} else {
				Expect(strings.TrimSpace(string(control))).To(Equal("0"))
			}

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
				case gvisor && slices.Contains([]string{"/workspace", "/etc/resolv.conf", "/etc/hostname", "/etc/hosts", "/sbin/docker-init"}, m.target):
					// gVisor serves every host file through its gofer (9p),
					// and its mountinfo shows no host path: which volume is
					// mounted is checked below through a file.
					Expect(m.fstype).To(Equal("9p"), line)
					workspace = workspace || m.target == "/workspace"
				case gvisor && m.target == "/tmp":
					// gVisor's own tmpfs, in the sandbox's memory.
					Expect(m.fstype).To(Equal("tmpfs"), line)
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
				case gvisor && m.target == "/dev":
					// gVisor's own device file system, no host device.
					Expect(kernel("dev", "tmpfs")).To(BeTrue(), "a %s mount at %s: %s", m.fstype, m.target, line)
				case under("/dev"):
					Expect(kernel("tmpfs", "devpts", "mqueue")).To(BeTrue(), "a %s mount at %s: %s", m.fstype, m.target, line)
				default:
					Fail("unexpected mount at " + m.target + ": " + line)
				}
			}
			Expect(workspace).To(BeTrue(), "the workspace is mounted")
			// What the sandbox writes to /workspace is in its volume.
			marker := "escape-" + plain.Status.VolumeName
			_, err = in(plain, "echo "+marker+" > /workspace/.escape-probe")
			Expect(err).NotTo(HaveOccurred())
			mountpoint, err := exec.Command("docker", "volume", "inspect", "-f", "{{.Mountpoint}}", plain.Status.VolumeName).Output()
			Expect(err).NotTo(HaveOccurred())
			written, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(mountpoint)), ".escape-probe"))
			Expect(err).NotTo(HaveOccurred())
			Expect(strings.TrimSpace(string(written))).To(Equal(marker))

			By("having an IPC namespace of its own")
			hostIPC, err := os.Readlink("/proc/self/ns/ipc")
			Expect(err).NotTo(HaveOccurred())
			ipcOf := func(s *afev1.Sandbox) string {
				out, err := in(s, "readlink /proc/self/ns/ipc")
				if gvisor {
					// gVisor's kernel shows an IPC namespace of its own
					// numbering (the same in every sandbox: each has a
					// kernel of its own); the host's IPC namespace of that
					// kernel is the sandbox's.
					out, err = os.Readlink(filepath.Join("/proc", hostPID(s.Status.ContainerName), "ns", "ipc"))
				}
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
			// The probe works against a's own proxy (which, under a loaded
			// gVisor, may take a moment to answer again after a reload).
			Eventually(func(g Gomega) {
				out, err := probe(aProxyIP, "3128")
				g.Expect(err).NotTo(HaveOccurred(), "the probe works against a's own proxy: %s", out)
				g.Expect(out).To(HavePrefix("HTTP/"))
			}, "20s", "500ms").Should(Succeed())
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
			// b's proxy is not a's: a's /etc/hosts names its own proxy
			// afe-proxy (the name a's programs resolve, under either
			// runtime), never b's.
			out, err = in(a, `awk '$2 == "afe-proxy" {print $1}' /etc/hosts`)
			Expect(err).NotTo(HaveOccurred())
			Expect(out).To(Equal(aProxyIP))
			Expect(out).NotTo(Equal(bProxyIP))
		})
	})
})

// hostPID is the host's process ID of the container's process: under
// gVisor, the process of gVisor's kernel that runs the sandbox.
func hostPID(container string) string {
	out, err := exec.Command("docker", "inspect", "-f", "{{.State.Pid}}", container).Output()
	Expect(err).NotTo(HaveOccurred())
	pid := strings.TrimSpace(string(out))
	Expect(pid).NotTo(Equal("0"), "%s runs", container)
	return pid
}

// hostStatus is a field of the host's /proc status of the container's
// process (hostPID).
func hostStatus(container, field string) string {
	b, err := os.ReadFile(filepath.Join("/proc", hostPID(container), "status"))
	Expect(err).NotTo(HaveOccurred())
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && k == field {
			return strings.TrimSpace(v)
		}
	}
	Fail("no " + field + " in the host's status of " + container)
	return ""
}
