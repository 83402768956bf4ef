package controllers

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/sandboxspec"
	"afe.dev/sandbox/test/dockertest"
)

// engineFree is the free space of the filesystem of the engine's data.
func engineFree() int64 {
	out, err := exec.Command("docker", "info", "-f", "{{.DockerRootDir}}").Output()
	Expect(err).NotTo(HaveOccurred())
	var st syscall.Statfs_t
	Expect(syscall.Statfs(strings.TrimSpace(string(out)), &st)).To(Succeed())
	return int64(st.Bavail) * st.Bsize
}

// workspaceSize is the engine's measure of the volume.
func workspaceSize(ctx context.Context, engine *docker.Client, volume string) int64 {
	df, err := engine.DiskUsage(ctx, nil)
	Expect(err).NotTo(HaveOccurred())
	return df.Volumes[volume].Bytes
}

// dirBytes is the size of the files under dir (the test reads the
// engine's data as root).
func dirBytes(dir string) int64 {
	var n int64
	Expect(filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return err
	})).To(Succeed())
	return n
}

// asRoot runs a shell command in the container as root (who owns the root
// filesystem, without any capability).
func asRoot(container, script string) (string, error) {
	out, err := exec.Command("docker", "exec", "-u", "0", container, "sh", "-c", script).CombinedOutput()
	return string(out), err
}

// Serial: Docker 20.10 runs one disk usage measurement at a time, and the
// other processes' collectors, busy with their own sandboxes, can hold it
// past this spec's waits on a loaded machine.
var _ = Describe("Sandbox disk limit", Serial, func() {
	// The read-only root, the bounded /tmp (a tmpfs of gVisor's own kernel
	// under runsc, which keeps its size), the engine's measure of the
	// workspace and the bound of the log are the same under every runtime.
	forEachRuntime(func(runtime string) {
		It("leaves a sandbox without resources.disk as it was: a writable root, no tmpfs", func() {
			ctx := context.Background()
			sbx := newSandbox(newNamespace(ctx), "nodisk")
			sbx.Spec.Runtime = runtime
			Expect(k8sClient.Create(ctx, sbx)).To(Succeed())
			DeferCleanup(func() { deleteAndWaitGone(ctx, sbx) })
			got := waitReady(ctx, sbx)
			Expect(got.Status.DiskEnforcement).To(BeEmpty())
			c, err := dockertest.Inspect(got.Status.ContainerName)
			Expect(err).NotTo(HaveOccurred())
			Expect(c.HostConfig.ReadonlyRootfs).To(BeFalse())
			Expect(c.HostConfig.Tmpfs).To(BeEmpty())
			Expect(asRoot(got.Status.ContainerName, "touch /layer")).Error().NotTo(HaveOccurred())
		})

		It("makes the root read-only with a bounded /tmp, and stops a sandbox whose workspace passes resources.disk before the engine's disk fills", func() {
			ctx := context.Background()
			engine, err := docker.New("")
			Expect(err).NotTo(HaveOccurred())
			quota, err := engine.StorageQuota(ctx)
			Expect(err).NotTo(HaveOccurred())
			sbx := newSandbox(newNamespace(ctx), "disk")
			sbx.Spec.Runtime = runtime
			sbx.Spec.Resources.Disk = ptr.To(resource.MustParse("16Mi"))
			Expect(k8sClient.Create(ctx, sbx)).To(Succeed())
			DeferCleanup(func() { deleteAndWaitGone(ctx, sbx) })
			got := waitReady(ctx, sbx)
			name := got.Status.ContainerName

			By("saying which enforcement holds on this engine")
			if quota {
				Expect(got.Status.DiskEnforcement).To(Equal(afev1.DiskStorageQuota))
				Skip("this engine limits writable layers: the read-only root is not used")
			}
			Expect(got.Status.DiskEnforcement).To(Equal(afev1.DiskReadOnlyRoot))

			By("refusing writes to the root filesystem, and bounding /tmp")
			c, err := dockertest.Inspect(name)
			Expect(err).NotTo(HaveOccurred())
			Expect(c.HostConfig.ReadonlyRootfs).To(BeTrue())
			Expect(c.HostConfig.Tmpfs).To(HaveKeyWithValue("/tmp", ContainSubstring("size="+strconv.Itoa(16<<20))))
			out, err := asRoot(name, "touch /layer")
			Expect(err).To(HaveOccurred(), "even root, who owns /")
			Expect(out).To(ContainSubstring("Read-only file system"))
			// Two files below the file size limit (the disk limit too), together
			// over the size of /tmp.
			out, err = inSandbox(name, "dd if=/dev/zero of=/tmp/a bs=1M count=10 && dd if=/dev/zero of=/tmp/b bs=1M count=10 2>&1; rm -f /tmp/a /tmp/b")
			Expect(err).NotTo(HaveOccurred())
			Expect(out).To(ContainSubstring("No space left on device"))

			By("stopping the sandbox when a workload writes past the limit")
			free := engineFree()
			// 4 MiB every 0.2 s, up to 1 GiB: unchecked, it would write it all.
			Expect(exec.Command("docker", "exec", "-d", name, "sh", "-c",
				`i=0; while [ $i -lt 256 ]; do dd if=/dev/zero of=/workspace/f$i bs=1M count=4 2>/dev/null; i=$((i+1)); sleep 0.2; done`).Run()).To(Succeed())
			start := time.Now()
			waitCondition(ctx, sbx, afev1.ContainerReadyCondition, metav1.ConditionFalse, afev1.DiskQuotaExceededReason)
			GinkgoWriter.Printf("stopped %s after the writer started\n", time.Since(start))
			Eventually(func() error { _, err := dockertest.Inspect(name); return err }).Should(HaveOccurred(), "the container is gone")
			Expect(getSandbox(ctx, sbx)(Default).Status.Phase).To(Equal(afev1.SandboxFailed))
			Eventually(func() []string { return eventReasons(ctx, sbx.Namespace, sbx) }).Should(ContainElement(afev1.DiskQuotaExceededReason))

			By("keeping it stopped, and the engine's free space with it")
			Consistently(func(g Gomega) {
				_, err := dockertest.Inspect(name)
				g.Expect(err).To(HaveOccurred(), "not started again")
			}, 5*time.Second, 500*time.Millisecond).Should(Succeed())
			used := workspaceSize(ctx, engine, got.Status.VolumeName)
			GinkgoWriter.Printf("workspace %d MiB when stopped; engine free space fell by %d MiB\n", used>>20, (free-engineFree())>>20)
			// Over the limit with what the engine may keep of its log (two
			// files of 512 KiB under a 16 MiB limit): stopped once the
			// volume passes 15 MiB.
			Expect(used).To(BeNumerically(">", 15<<20))
			Expect(used).To(BeNumerically("<", 256<<20), "stopped within a few seconds of writing")
			Expect(free-engineFree()).To(BeNumerically("<", 512<<20), "far from the 1 GiB the workload would write")

			By("starting it again, with its workspace, once the limit is raised")
			Eventually(func(g Gomega) {
				cur := getSandbox(ctx, sbx)(g)
				cur.Spec.Resources.Disk = ptr.To(resource.MustParse("2Gi"))
				g.Expect(k8sClient.Update(ctx, cur)).To(Succeed())
			}).Should(Succeed())
			got = waitReady(ctx, sbx)
			Expect(inSandbox(got.Status.ContainerName, "test -e /workspace/f0")).Error().NotTo(HaveOccurred())
		})

		It("keeps at most its own bound of a sandbox's log on the engine's disk, whatever the engine's defaults", func() {
			ctx := context.Background()
			sbx := newSandbox(newNamespace(ctx), "disklog")
			sbx.Spec.Runtime = runtime
			sbx.Spec.Resources.Disk = ptr.To(resource.MustParse("16Mi"))
			Expect(k8sClient.Create(ctx, sbx)).To(Succeed())
			DeferCleanup(func() { deleteAndWaitGone(ctx, sbx) })
			got := waitReady(ctx, sbx)
			name := got.Status.ContainerName

			By("configuring the log explicitly, nothing left to the engine's daemon.json")
			c, err := dockertest.Inspect(name)
			Expect(err).NotTo(HaveOccurred())
			bound := sandboxspec.SandboxLog(got.Spec.Resources)
			Expect(c.HostConfig.LogConfig.Type).To(Equal("local"))
			Expect(c.HostConfig.LogConfig.Config).To(Equal(map[string]string{
				"max-size": strconv.FormatInt(bound.MaxFileBytes, 10), "max-file": strconv.Itoa(bound.Files), "compress": "false",
			}))

			By("keeping at most the bound of 40 MB a workload writes to the output of PID 1")
			Expect(inSandbox(name, "yes 0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz | head -c 40000000 > /proc/1/fd/1")).Error().NotTo(HaveOccurred())
			out, err := exec.Command("docker", "info", "-f", "{{.DockerRootDir}}").Output()
			Expect(err).NotTo(HaveOccurred())
			dir := filepath.Join(strings.TrimSpace(string(out)), "containers", c.ID)
			var kept int64 = -1
			Eventually(func() int64 {
				last := kept
				kept = dirBytes(dir)
				return kept - last
			}, "60s", "1s").Should(BeZero(), "the engine's log stops growing")
			GinkgoWriter.Printf("the engine keeps %d bytes of the sandbox's container (log bound %d)\n", kept, bound.Bound())
			// Besides the log: config, hostname, hosts, resolv.conf.
			Expect(kept).To(BeNumerically("<=", bound.Bound()+64<<10))
			Expect(getSandbox(ctx, sbx)(Default).Status.Phase).To(Equal(afev1.SandboxReady), "the bound is reserved in resources.disk")
		})

		It("stops a disk-limited sandbox whose workspace the engine cannot measure: a path longer than the host allows", func() {
			ctx := context.Background()
			engine, err := docker.New("")
			Expect(err).NotTo(HaveOccurred())
			sbx := newSandbox(newNamespace(ctx), "deep")
			sbx.Spec.Runtime = runtime
			sbx.Spec.Resources.Disk = ptr.To(resource.MustParse("64Mi"))
			Expect(k8sClient.Create(ctx, sbx)).To(Succeed())
			DeferCleanup(func() { deleteAndWaitGone(ctx, sbx) })
			got := waitReady(ctx, sbx)
			name, volume := got.Status.ContainerName, got.Status.VolumeName

			By("making a directory chain of 21 names of 200 characters, from its end up (a file in it, then each level moved into a new one), so no path the workload uses is long")
			out, err := exec.Command("docker", "volume", "inspect", "-f", "{{.Mountpoint}}", volume).Output()
			Expect(err).NotTo(HaveOccurred())
			Expect(len(strings.TrimSpace(string(out)))+21*201).To(BeNumerically(">", 4095), "longer than PATH_MAX on the host")
			Expect(inSandbox(name, `d=$(printf 'd%.0s' $(seq 200)); cd /workspace && mkdir $d && dd if=/dev/zero of=$d/f bs=1M count=1 2>/dev/null && for i in $(seq 20); do mkdir n && mv $d n/ && mv n $d || exit 1; done`)).Error().NotTo(HaveOccurred())
			Eventually(func() int64 { return workspaceSize(ctx, engine, volume) }, "30s", "1s").Should(BeEquivalentTo(-1), "the engine's own measure fails")

			By("stopping it, the reason naming the volume that cannot be measured")
			cond := waitCondition(ctx, sbx, afev1.ContainerReadyCondition, metav1.ConditionFalse, afev1.DiskQuotaExceededReason)
			Expect(cond.Message).To(ContainSubstring("cannot measure volume " + volume))
			Expect(cond.Message).To(ContainSubstring("remove resources.disk"))
			Eventually(func() error { _, err := dockertest.Inspect(name); return err }).Should(HaveOccurred(), "the container is gone")
			Consistently(func(g Gomega) {
				_, err := dockertest.Inspect(name)
				g.Expect(err).To(HaveOccurred(), "not started again")
			}, 3*time.Second, 500*time.Millisecond).Should(Succeed())
		})
	})
})
