package controllers

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// uskUID and uskGID are the sandbox's user in the specs below: ids no other
// process of the host has, so the host can be searched for them.
const uskUID, uskGID = 31337, 31338

// What a user-space kernel (gVisor's runsc) adds to the boundary: the
// workload's system calls are served by gVisor's own kernel, not the
// host's. Under runc the same body asserts the runc facts, so each runtime
// is compared with the other (docs/threat-model.md, runsc column).
var _ = Describe("What a user-space kernel adds", func() {
	forEachRuntime(func(runtime string) {
		Describe("the kernel the workload talks to", Ordered, func() {
			var sbx *afev1.Sandbox
			var gvisor bool
			BeforeAll(func() {
				ctx := context.Background()
				gvisor = userSpaceKernel(runtime)
				sbx = newSandbox(newNamespace(ctx), "usk")
				sbx.Spec.Runtime = runtime
				sbx.Spec.User = fmt.Sprintf("%d:%d", uskUID, uskGID)
				Expect(k8sClient.Create(ctx, sbx)).To(Succeed())
				sbx = waitReady(ctx, sbx)
				DeferCleanup(func() { deleteAndWaitGone(context.Background(), sbx) })
			})

			It("hides the host's kernel version: /proc/version and uname -r are the user-space kernel's", func() {
				host, err := os.ReadFile("/proc/sys/kernel/osrelease")
				Expect(err).NotTo(HaveOccurred())
				hostRelease := strings.TrimSpace(string(host))
				out, err := inSandbox(sbx.Status.ContainerName, "cat /proc/version; uname -r")
				Expect(err).NotTo(HaveOccurred(), out)
				lines := strings.Split(strings.TrimSpace(out), "\n")
				Expect(lines).To(HaveLen(2), out)
				version, release := lines[0], lines[1]
				GinkgoWriter.Printf("%s: host %s; inside %q, uname -r %s\n", runtime, hostRelease, version, release)
				Expect(version).To(HavePrefix("Linux version " + release + " "))
				if gvisor {
					Expect(release).NotTo(Equal(hostRelease))
					Expect(out).NotTo(ContainSubstring(hostRelease))
				} else {
					Expect(release).To(Equal(hostRelease))
				}
			})

			It("serves dmesg from the user-space kernel's own log, where the host's kernel refuses it", func() {
				out, err := inSandbox(sbx.Status.ContainerName, "dmesg 2>&1; echo rc=$?")
				Expect(err).NotTo(HaveOccurred(), out)
				if gvisor {
					Expect(out).To(ContainSubstring("Starting gVisor"))
					Expect(out).To(HaveSuffix("rc=0"))
				} else {
					// No CAP_SYSLOG: the host's kernel keeps its log.
					Expect(out).To(ContainSubstring("Operation not permitted"))
					Expect(out).NotTo(ContainSubstring("gVisor"))
					Expect(out).NotTo(HaveSuffix("rc=0"))
				}
			})

			It("runs the workload's processes where the host's process table does not have them", func() {
				ctx := context.Background()
				marker := fmt.Sprintf("afe-usk-marker-%d-%s", os.Getpid(), runtime)
				run := newRun(sbx.Namespace, "marker", sbx.Name)
				run.Spec.Command = []string{"sh", "-c", "sleep 300; : " + marker}
				Expect(k8sClient.Create(ctx, run)).To(Succeed())
				waitRunPhase(ctx, run, afev1.RunRunning)

				By("seeing the marked process inside the sandbox, as its user")
				Eventually(func(g Gomega) {
					out, err := inSandbox(sbx.Status.ContainerName, "grep -l '[a]"+marker[1:]+"' /proc/[0-9]*/cmdline")
					g.Expect(err).NotTo(HaveOccurred(), out)
					g.Expect(strings.Fields(out)).NotTo(BeEmpty())
					status, err := inSandbox(sbx.Status.ContainerName, "grep Uid "+filepath.Dir(strings.Fields(out)[0])+"/status")
					g.Expect(err).NotTo(HaveOccurred())
					g.Expect(strings.Fields(status)[1]).To(Equal(strconv.Itoa(uskUID)))
				}).Should(Succeed())

				By("looking for it among the host's processes, by its arguments and by the sandbox's uid")
				marked, ofUser := hostProcesses(marker, uskUID)
				GinkgoWriter.Printf("%s: host processes with the marker %v, with uid %d %v\n", runtime, marked, uskUID, ofUser)
				if gvisor {
					Expect(marked).To(BeEmpty(), "gVisor's processes are not host processes")
					Expect(ofUser).To(BeEmpty(), "no host process runs as the sandbox's user")
				} else {
					Expect(marked).NotTo(BeEmpty(), "under runc the workload is a host process")
					Expect(ofUser).NotTo(BeEmpty())
				}
				Expect(k8sClient.Delete(ctx, run)).To(Succeed())
			})
		})
	})
})

// hostProcesses are the pids of the host's processes (as this test's /proc
// shows them: it shares the engine's process namespace) whose command line
// holds marker, and those whose real uid is uid.
func hostProcesses(marker string, uid int) (marked, ofUser []string) {
	dirs, err := filepath.Glob("/proc/[0-9]*")
	Expect(err).NotTo(HaveOccurred())
	for _, dir := range dirs {
		pid := filepath.Base(dir)
		if cmdline, err := os.ReadFile(filepath.Join(dir, "cmdline")); err == nil && strings.Contains(string(cmdline), marker) {
			marked = append(marked, pid)
		}
		status, err := os.ReadFile(filepath.Join(dir, "status"))
		if err != nil {
			continue // gone since the listing
		}
		for _, line := range strings.Split(string(status), "\n") {
			if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" && f[1] == strconv.Itoa(uid) {
				ofUser = append(ofUser, pid)
			}
		}
	}
	return marked, ofUser
}
