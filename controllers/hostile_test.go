package controllers

import (
	"context"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/test/dockertest"
)

// Workloads that try to take the machine down stop at the sandbox's limits,
// and the controller and other sandboxes keep working meanwhile.
var _ = Describe("Hostile workloads", func() {
	var ctx context.Context
	var ns string
	var victim, bystander *afev1.Sandbox
	BeforeEach(func() {
		ctx = context.Background()
		ns = newNamespace(ctx)
		victim = newSandbox(ns, "victim")
		victim.Spec.Resources = afev1.SandboxResources{
			CPU: ptr.To(resource.MustParse("500m")), Memory: ptr.To(resource.MustParse("32Mi")), Pids: 32,
			FileSize: ptr.To(resource.MustParse("1Mi")), OpenFiles: 64,
		}
		bystander = newSandbox(ns, "bystander")
		Expect(k8sClient.Create(ctx, victim)).To(Succeed())
		Expect(k8sClient.Create(ctx, bystander)).To(Succeed())
		victim, bystander = waitReady(ctx, victim), waitReady(ctx, bystander)
	})
	AfterEach(func() {
		deleteAndWaitGone(ctx, victim)
		deleteAndWaitGone(ctx, bystander)
	})

	// bystanderWorks: another sandbox still runs a command promptly.
	bystanderWorks := func(name string) {
		run := newRun(ns, name, bystander.Name)
		run.Spec.Command = []string{"echo", "fine"}
		t0 := time.Now()
		Expect(k8sClient.Create(ctx, run)).To(Succeed())
		got := waitRunPhase(ctx, run, afev1.RunCompleted)
		Expect(got.Status.Output).To(Equal("fine\n"))
		GinkgoWriter.Printf("bystander Run during the attack: %s\n", time.Since(t0))
	}

	It("stops a fork bomb at the pids limit", func() {
		bomb := newRun(ns, "forkbomb", victim.Name)
		bomb.Spec.Script = `f() { f | f & }; f; sleep 5; echo survived`
		bomb.Spec.TimeoutSeconds = ptr.To[int32](8)
		Expect(k8sClient.Create(ctx, bomb)).To(Succeed())
		waitRunPhase(ctx, bomb, afev1.RunRunning)
		bystanderWorks("during-bomb")
		got := &afev1.Run{}
		Eventually(func(g Gomega) {
			got = getRun(ctx, bomb)(g)
			g.Expect(got.Status.Phase.Terminal()).To(BeTrue())
		}, "60s").Should(Succeed())
		Expect(got.Status.Output).To(ContainSubstring("can't fork"))
		// Nothing of the bomb is left, and the sandbox is still usable.
		Eventually(func() int {
			out, _ := dockertest.Exec(victim.Status.ContainerName, "sh", "-c", "ps -o pid | wc -l")
			n, _ := strconv.Atoi(out)
			return n
		}).Should(BeNumerically("<", 8))
		after := newRun(ns, "after-bomb", victim.Name)
		after.Spec.Command = []string{"true"}
		Expect(k8sClient.Create(ctx, after)).To(Succeed())
		waitRunPhase(ctx, after, afev1.RunCompleted)
	})

	It("kills a memory hog at the memory limit and reports exit 137", func() {
		hog := newRun(ns, "hog", victim.Name)
		// The shell keeps 256 MiB of command output in a variable.
		hog.Spec.Script = `x=$(yes | head -c 268435456); echo survived`
		hog.Spec.TimeoutSeconds = ptr.To[int32](60)
		Expect(k8sClient.Create(ctx, hog)).To(Succeed())
		got := waitRunPhase(ctx, hog, afev1.RunCompleted)
		Expect(*got.Status.ExitCode).To(Equal(int32(137)))
		Expect(got.Status.OK).To(BeFalse())
		bystanderWorks("after-hog")
		Expect(getSandbox(ctx, victim)(Default).Status.Phase).To(Equal(afev1.SandboxReady))
	})

	It("refuses a file larger than resources.fileSize with EFBIG", func() {
		big := newRun(ns, "bigfile", victim.Name)
		big.Spec.Script = `trap '' XFSZ; dd if=/dev/zero of=/workspace/big bs=1024 count=2048; rc=$?; wc -c < /workspace/big; exit $rc`
		Expect(k8sClient.Create(ctx, big)).To(Succeed())
		got := waitRunPhase(ctx, big, afev1.RunCompleted)
		Expect(got.Status.OK).To(BeFalse())
		Expect(got.Status.Output).To(ContainSubstring("File too large"))
		Expect(got.Status.Output).To(ContainSubstring("1048576"))
	})

	It("limits open files to resources.openFiles", func() {
		files := newRun(ns, "files", victim.Name)
		// Descriptors are numbered below the limit: 63 is the last usable.
		files.Spec.Script = `grep 'Max open files' /proc/self/limits; (exec 63</dev/null) && echo fd-63-ok; (exec 64</dev/null) 2>/dev/null || { echo fd-64-refused; exit 1; }`
		Expect(k8sClient.Create(ctx, files)).To(Succeed())
		got := waitRunPhase(ctx, files, afev1.RunCompleted)
		Expect(strings.Fields(got.Status.Output)[3:5]).To(Equal([]string{"64", "64"}))
		Expect(got.Status.OK).To(BeFalse(), got.Status.Output)
		Expect(got.Status.Output).To(ContainSubstring("fd-63-ok\nfd-64-refused"))
	})
})
