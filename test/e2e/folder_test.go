package e2e

import (
	"fmt"
	"os"
	"path/filepath"

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
		own := newOwnCluster()
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
			return own.startManager("", nil, append([]string{"--instance", inst, "--docker-host", fwd.Host(), "--workspace-root", link}, extra...)...)
		}
		kubectl := own.kubectl
		reason := own.reason

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
		stopManager(mgr)

		By("with --workspace-root-shared the same Sandbox becomes Ready")
		mgr = start("--workspace-root-shared")
		defer stopManager(mgr)
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
