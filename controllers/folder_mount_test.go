package controllers

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/nosuidroot"
	"afe.dev/sandbox/test/dockertest"
)

// Issue 27: a Folder workspace is a directory of the host's file system, so
// what a workload leaves there is on the host. The suite's --workspace-root
// is mounted nosuid,nodev, as the manager asks.
var _ = Describe("Folder workspaces on the host's file system", func() {
	var ctx context.Context
	var ns, nsDir string
	BeforeEach(func() {
		ctx = context.Background()
		ns = newNamespace(ctx)
		nsDir = filepath.Join(workspaceRoot, ns)
	})

	It("give no host user the uid of a setuid program a workload leaves in its folder, and the sandbox sees its folder nosuid,nodev", func() {
		dir := filepath.Join(nsDir, "setuid")
		mkdirs(dir)
		sbx := folderSandbox(ns, "setuid", dir, "")
		sbx.Spec.User = "1000:1000"
		Expect(k8sClient.Create(ctx, sbx)).To(Succeed())
		got := waitReady(ctx, sbx)

		By("the workload copies a program that prints its euid and makes it setuid and setgid")
		out, err := dockertest.Exec(got.Status.ContainerName, "sh", "-c",
			"cp /opt/suid/euid /workspace/euid && chmod 6755 /workspace/euid && ls -ln /workspace/euid")
		Expect(err).NotTo(HaveOccurred(), out)
		var st syscall.Stat_t
		Expect(syscall.Stat(filepath.Join(dir, "euid"), &st)).To(Succeed())
		Expect(st.Uid).To(BeEquivalentTo(1000))
		Expect(st.Mode&(syscall.S_ISUID|syscall.S_ISGID)).To(BeEquivalentTo(syscall.S_ISUID|syscall.S_ISGID), "the host sees the bits the workload set: %s", out)

		By("a host user (nobody) runs it from the host's path: it keeps its own euid")
		cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", filepath.Join(dir, "euid"))
		euid, err := cmd.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(euid))
		Expect(strings.TrimSpace(string(euid))).To(Equal("65534"), "a host process became the sandbox's uid through its setuid file")

		By("inside the sandbox /workspace is mounted nosuid,nodev")
		mounts, err := dockertest.Exec(got.Status.ContainerName, "cat", "/proc/self/mountinfo")
		Expect(err).NotTo(HaveOccurred(), mounts)
		var line string
		for _, l := range strings.Split(mounts, "\n") {
			if f := strings.Fields(l); len(f) > 5 && f[4] == "/workspace" {
				line = l
			}
		}
		Expect(line).NotTo(BeEmpty(), mounts)
		opts := strings.Split(strings.Fields(line)[5], ",")
		Expect(opts).To(ContainElements("nosuid", "nodev"), line)
		deleteAndWaitGone(ctx, sbx)
	})

	It("refuses a folder on a file system mounted without nosuid,nodev and removes its container", func() {
		dir := filepath.Join(nsDir, "suid")
		mkdirs(dir)
		sbx := folderSandbox(ns, "suid", dir, "")
		Expect(k8sClient.Create(ctx, sbx)).To(Succeed())
		waitReady(ctx, sbx)

		By("an operator mounts a file system there that allows setuid programs and devices")
		unmount, err := nosuidroot.MountAllowingSuid(dir)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { Expect(unmount()).To(Succeed()) })
		// The Sandbox is looked at again when its spec changes.
		got := getSandbox(ctx, sbx)(Default)
		got.Spec.TimeoutSeconds = 601
		Expect(k8sClient.Update(ctx, got)).To(Succeed())
		c := waitCondition(ctx, sbx, afev1.WorkspaceReadyCondition, metav1.ConditionFalse, afev1.WorkspaceRootUnsafeReason)
		Expect(c.Message).To(ContainSubstring("mount -o remount,bind,nosuid,nodev"))
		Expect(c.Message).To(ContainSubstring("--workspace-root-allow-suid"))
		Eventually(func() bool { return hasContainer(sbx) }).Should(BeFalse())
		deleteAndWaitGone(ctx, sbx)
	})
})
