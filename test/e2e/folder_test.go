package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/test/dockertest"
)

// An engine reached over TCP may not see the controller's folders: Folder
// workspaces are refused, with a condition that says so, until the operator
// says the root is shared.
var _ = Describe("Folder workspaces on a remote engine", func() {
	It("are refused unless --workspace-root-shared", func() {
		own := ownControlPlane()
		defer func() { Expect(own.Stop()).To(Succeed()) }()
		fwd, err := dockertest.NewTCPForwarder()
		Expect(err).NotTo(HaveOccurred())
		defer fwd.Cut()
		inst := fmt.Sprintf("e2e-remote-%d", os.Getpid())
		defer dockertest.RemoveAll(afev1.LabelController + "=" + inst)
		// The operator names the root through a link; sandboxes name their
		// folders through it too. What the engine binds is the resolved
		// path, with no link on it.
		root := GinkgoT().TempDir()
		link := filepath.Join(GinkgoT().TempDir(), "root-link")
		Expect(os.Symlink(root, link)).To(Succeed())
		resolved := filepath.Join(root, "default", "ws")
		Expect(os.MkdirAll(resolved, 0o755)).To(Succeed())
		ws := filepath.Join(link, "default", "ws")

		start := func(extra ...string) *gexec.Session {
			args := append([]string{"--instance", inst, "--docker-host", fwd.Host(), "--workspace-root", link,
				"--metrics-bind-address", "0", "--health-probe-bind-address", "0"}, extra...)
			cmd := exec.Command(managerBin, args...)
			cmd.Env = append(os.Environ(), "KUBECONFIG="+own.Kubeconfig)
			s, err := gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
			Expect(err).NotTo(HaveOccurred())
			return s
		}
		stop := func(s *gexec.Session) {
			s.Signal(syscall.SIGTERM)
			Eventually(s, 20*time.Second).Should(gexec.Exit())
		}
		kubectl := func(stdin string, args ...string) string {
			cmd := exec.Command("kubectl", append([]string{"--kubeconfig", own.Kubeconfig, "-n", "default"}, args...)...)
			cmd.Stdin = strings.NewReader(stdin)
			out, err := cmd.CombinedOutput()
			ExpectWithOffset(1, err).NotTo(HaveOccurred(), string(out))
			return strings.TrimSpace(string(out))
		}
		reason := func(obj, cond string) func() string {
			return func() string {
				out, _ := exec.Command("kubectl", "--kubeconfig", own.Kubeconfig, "-n", "default", "get", obj,
					"-o", `jsonpath={.status.conditions[?(@.type=="`+cond+`")].reason}`).CombinedOutput()
				return strings.TrimSpace(string(out))
			}
		}

		mgr := start()
		kubectl(fmt.Sprintf(`apiVersion: sandbox.afe.dev/v1alpha1
kind: Sandbox
metadata: {name: folder}
spec:
  image: afe/busybox:dev
  workspace: {type: Folder, hostPath: %s}
---
apiVersion: sandbox.afe.dev/v1alpha1
kind: Sandbox
metadata: {name: volume}
spec: {image: afe/busybox:dev}
`, ws), "apply", "-f", "-")
		By("the engine works over TCP: a Volume workspace is Ready")
		kubectl("", "wait", "--for=condition=Ready", "sandbox/volume", "--timeout=60s")
		By("a Folder workspace is refused, and nothing is made for it")
		Eventually(reason("sandbox/folder", afev1.WorkspaceReadyCondition)).Should(Equal(afev1.WorkspaceNotSharedReason))
		Expect(kubectl("", "get", "sandbox/folder", "-o", `jsonpath={.status.conditions[?(@.type=="WorkspaceReady")].message}`)).
			To(ContainSubstring("--workspace-root-shared"))
		Expect(kubectl("", "get", "sandbox/folder", "-o", "jsonpath={.status.phase}")).To(Equal(string(afev1.SandboxFailed)))
		Expect(dockertest.Objects(afev1.LabelController + "=" + inst + "," + afev1.LabelSandbox + "=folder")).To(BeEmpty())
		stop(mgr)

		By("with --workspace-root-shared the same Sandbox becomes Ready")
		mgr = start("--workspace-root-shared")
		defer stop(mgr)
		kubectl("", "wait", "--for=condition=Ready", "sandbox/folder", "--timeout=60s")
		c, err := dockertest.Inspect("afe-default.folder")
		Expect(err).NotTo(HaveOccurred())
		Expect(c.Mounts).To(HaveLen(1))
		real, err := filepath.EvalSymlinks(resolved)
		Expect(err).NotTo(HaveOccurred())
		Expect(c.Mounts[0].Source).To(Equal(real), "the engine binds the resolved path, not %s", ws)
		kubectl("", "delete", "sandbox/folder", "sandbox/volume", "--wait=true", "--timeout=60s")
	})
})
