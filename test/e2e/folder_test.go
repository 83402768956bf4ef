package e2e

import (
	"fmt"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
	"github.com/onsi/gomega/gexec"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/test/dockertest"
	"afe.dev/sandbox/test/wsroot"
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
		root, cleanupRoot, err := wsroot.Make(true)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { Expect(cleanupRoot()).To(Succeed()) })
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

// Issue 27: a --workspace-root whose file system allows setuid programs and
// devices lets a workload leave them for the host's users. The manager says
// so at start and refuses Folder workspaces there, with a condition that
// says how to mount the root, until the operator accepts the risk.
var _ = Describe("Folder workspaces on a root not mounted nosuid,nodev", func() {
	It("are refused (WorkspaceRootUnsafe), with an error at start, unless --workspace-root-allow-suid", func() {
		own := newOwnCluster()
		inst := fmt.Sprintf("e2e-suid-%d", os.Getpid())
		defer dockertest.RemoveAll(afev1.LabelController + "=" + inst)
		root, cleanupRoot, err := wsroot.Make(false)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { Expect(cleanupRoot()).To(Succeed()) })
		ws := filepath.Join(root, "default", "ws")
		Expect(os.MkdirAll(ws, 0o755)).To(Succeed())

		start := func(extra ...string) (*gexec.Session, *gbytes.Buffer) {
			errs := gbytes.NewBuffer()
			return own.startManager("", errs, append([]string{"--instance", inst, "--workspace-root", root}, extra...)...), errs
		}
		mgr, errs := start()
		// Whichever manager runs when the spec ends, early or not, stops.
		defer func() { stopManager(mgr) }()
		Eventually(errs).Should(gbytes.Say(`Folder workspaces are refused \(WorkspaceRootUnsafe\) until --workspace-root is mounted nosuid,nodev`))
		own.kubectl(fmt.Sprintf(`apiVersion: sandbox.afe.dev/v1alpha1
kind: Sandbox
metadata: {name: folder}
spec:
  image: afe/busybox:dev
  workspace: {type: Folder, hostPath: %s}
`, ws), "apply", "-f", "-")
		Eventually(own.condition("sandbox/folder", afev1.WorkspaceReadyCondition)).Should(And(HavePrefix(afev1.WorkspaceRootUnsafeReason+": "),
			ContainSubstring("mount -o remount,bind,nosuid,nodev"), ContainSubstring("--workspace-root-allow-suid")))
		Expect(dockertest.Objects(afev1.LabelController + "=" + inst + "," + afev1.LabelSandbox + "=folder")).To(BeEmpty())
		stopManager(mgr)

		By("with --workspace-root-allow-suid the same Sandbox becomes Ready")
		mgr, _ = start("--workspace-root-allow-suid")
		own.kubectl("", "wait", "--for=condition=Ready", "sandbox/folder", "--timeout=60s")
		own.kubectl("", "delete", "sandbox/folder", "--wait=true", "--timeout=60s")
	})
})
