package controllers

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	runctrl "afe.dev/sandbox/controllers/run"
	"afe.dev/sandbox/test/dockertest"
)

// Workloads that try to take the machine down stop at the sandbox's limits,
// and the controller and other sandboxes keep working meanwhile. Serial:
// they measure what a workload does to the engine (a memory hog at its
// limit stayed Running 60 s while another process's OOM loop ran beside
// it on two cores), so no other spec of this suite runs beside them.
var _ = Describe("Hostile workloads", Serial, func() {
	forEachRuntime(func(runtime string) {
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
			if userSpaceKernel(runtime) {
				// gVisor's kernel (about 14 MiB idle, 54 MiB measured
				// under the fork bomb below) counts against the limit: at
				// 32Mi the bomb would end the whole sandbox before its 32
				// processes.
				victim.Spec.Resources.Memory = ptr.To(resource.MustParse("128Mi"))
			}
			bystander = newSandbox(ns, "bystander")
			victim.Spec.Runtime, bystander.Spec.Runtime = runtime, runtime
			Expect(k8sClient.Create(ctx, victim)).To(Succeed())
			Expect(k8sClient.Create(ctx, bystander)).To(Succeed())
			victim, bystander = waitReady(ctx, victim), waitReady(ctx, bystander)
		})
		AfterEach(func() {
			deleteAndWaitGone(ctx, victim)
			deleteAndWaitGone(ctx, bystander)
		})

		// bystanderWorks: another sandbox still runs a command promptly, within
		// a bound of its own (a Run of echo takes well under a second here;
		// the bound is generous for a loaded machine, far below the suite's
		// default wait).
		const bystanderBound = 8 * time.Second
		bystanderWorks := func(name string) {
			run := newRun(ns, name, bystander.Name)
			run.Spec.Command = []string{"echo", "fine"}
			t0 := time.Now()
			Expect(k8sClient.Create(ctx, run)).To(Succeed())
			var got *afev1.Run
			Eventually(func(g Gomega) {
				got = getRun(ctx, run)(g)
				g.Expect(got.Status.Phase).To(Equal(afev1.RunCompleted))
			}, bystanderBound, "50ms").Should(Succeed(), "the bystander's Run ends within %s", bystanderBound)
			Expect(got.Status.Output).To(Equal("fine\n"))
			GinkgoWriter.Printf("bystander Run during the attack: %s\n", time.Since(t0))
		}

		// memoryHog doubles a string until the memory limit kills it: each
		// step passes the limit by as much as the sandbox holds, so the kill
		// comes at once. (A hog that creeps up to the limit, a shell growing a
		// variable from a pipe, sits in the kernel's reclaim there: its
		// programs' pages are dropped and read again, thousands of major faults
		// a second, and the kill took over a minute on a loaded machine.)
		memoryHog := []string{"awk", `BEGIN { s = "0123456789abcdef"; while (1) s = s s }`}

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
			// An exec the pids limit refuses is an error, not zero processes.
			Eventually(func() (int, error) {
				out, err := dockertest.Exec(victim.Status.ContainerName, "sh", "-c", "ps -o pid | wc -l")
				if err != nil {
					return 0, err
				}
				return strconv.Atoi(out)
			}).Should(BeNumerically("<", 8))
			after := newRun(ns, "after-bomb", victim.Name)
			after.Spec.Command = []string{"true"}
			Expect(k8sClient.Create(ctx, after)).To(Succeed())
			waitRunPhase(ctx, after, afev1.RunCompleted)
		})

		// sandboxOOMKilled checks how gVisor keeps the memory limit: its own
		// kernel kills the process past it, as runc's host kernel does (the
		// Run exits 137), or, when what gVisor's kernel holds besides (its
		// memory file) takes the host's count of the whole sandbox past the
		// host's limit first, the host's OOM kill ends that kernel: the
		// sandbox's container exits 137 and the controller recreates it (a
		// loss). The Run, cut short by the loss, is not executed again
		// (maxAttempts 1: its next attempt would be the same hog); the
		// engine client watches the container of a lasting exec under
		// gVisor and ends with it, so the Run ends at once, its attempts
		// exhausted, long before its deadline. Either way the hog is
		// stopped and the victim is Ready again.
		sandboxOOMKilled := func(hog *afev1.Run, before *afev1.Sandbox) {
			var got *afev1.Run
			Eventually(func(g Gomega) {
				got = getRun(ctx, hog)(g)
				g.Expect(got.Status.Phase.Terminal()).To(BeTrue())
			}, time.Duration(*hog.Spec.TimeoutSeconds)*time.Second+runctrl.KillGrace+30*time.Second).Should(Succeed())
			reason := findCondition(got.Status.Conditions, afev1.RunCompletedCondition).Reason
			GinkgoWriter.Printf("the hog's Run ended %s (%s) after %d ms\n", got.Status.Phase, reason, got.Status.DurationMilliseconds)
			if got.Status.Phase == afev1.RunCompleted {
				Expect(*got.Status.ExitCode).To(Equal(int32(137)), "killed by gVisor's kernel at the limit")
				Expect(got.Status.OK).To(HaveValue(BeFalse()))
				return
			}
			Expect([2]string{string(got.Status.Phase), reason}).To(Equal(
				[2]string{string(afev1.RunFailed), afev1.AttemptsExhaustedReason}), "ended with its sandbox, not at its deadline")
			Eventually(func() []string { return eventMessages(ctx, ns, before, afev1.SandboxLostReason) }, "10s").
				Should(ContainElement(ContainSubstring("exited with code 137")), "the whole sandbox was OOM-killed")
			after := waitReady(ctx, victim)
			Expect(after.Status.Recreations).To(Equal(before.Status.Recreations + 1))
			Expect(after.Status.ContainerID).NotTo(Equal(before.Status.ContainerID))
		}

		It("kills a memory hog at the memory limit and reports exit 137", func() {
			hog := newRun(ns, "hog", victim.Name)
			hog.Spec.Command = memoryHog
			hog.Spec.TimeoutSeconds = ptr.To[int32](60)
			if userSpaceKernel(runtime) {
				hog.Spec.MaxAttempts = ptr.To[int32](1)
				hog.Spec.TimeoutSeconds = ptr.To[int32](60) // see sandboxOOMKilled
			}
			Expect(k8sClient.Create(ctx, hog)).To(Succeed())
			if userSpaceKernel(runtime) {
				sandboxOOMKilled(hog, victim)
			} else {
				got := waitRunPhase(ctx, hog, afev1.RunCompleted)
				Expect(*got.Status.ExitCode).To(Equal(int32(137)))
				Expect(got.Status.OK).To(HaveValue(BeFalse()))
			}
			bystanderWorks("after-hog")
			Expect(getSandbox(ctx, victim)(Default).Status.Phase).To(Equal(afev1.SandboxReady))
		})

		It("keeps another sandbox responsive while one sits at its memory limit", func() {
			// Each hog grows past the limit and is killed; the loop starts the
			// next: the sandbox stays at its limit until the deadline.
			hog := newRun(ns, "pressure", victim.Name)
			hog.Spec.Command = append([]string{"sh", "-c", `while :; do "$@"; echo oom-$?; done`, "pressure"}, memoryHog...)
			// Past the wait for the first kill (10 s) and the three
			// bystanders' bounds (24 s) with room to spare: the hog is
			// still running when they are done, however loaded the host.
			hog.Spec.TimeoutSeconds = ptr.To[int32](60)
			if userSpaceKernel(runtime) {
				// Under gVisor its own kernel kills the hogs, which the
				// host's cgroup does not count, and after a few kills the
				// host's OOM kill may end the whole sandbox
				// (sandboxOOMKilled). The bystander keeps working through
				// the kills and any recreation; once the hog is gone the
				// victim is Ready again.
				hog.Spec.MaxAttempts = ptr.To[int32](1)
				Expect(k8sClient.Create(ctx, hog)).To(Succeed())
				for i := range 3 {
					bystanderWorks(fmt.Sprintf("during-pressure-%d", i))
				}
				Expect(k8sClient.Delete(ctx, hog)).To(Succeed())
				Eventually(func() bool {
					return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(hog), &afev1.Run{}))
				}, time.Minute).Should(BeTrue())
				waitReady(ctx, victim)
				return
			}
			Expect(k8sClient.Create(ctx, hog)).To(Succeed())
			waitRunPhase(ctx, hog, afev1.RunRunning)
			// cgroup v1 and v2 both count the kills as "oom_kill N".
			oomKills := func(g Gomega) int {
				out, err := exec.Command("docker", "exec", victim.Status.ContainerName, "cat", "/sys/fs/cgroup/memory/memory.oom_control", "/sys/fs/cgroup/memory.events").CombinedOutput()
				m := regexp.MustCompile(`(?m)^oom_kill (\d+)`).FindStringSubmatch(string(out))
				g.Expect(m).NotTo(BeNil(), "no oom_kill count: %s %v", out, err)
				n, _ := strconv.Atoi(m[1])
				return n
			}
			var first int
			Eventually(func(g Gomega) {
				first = oomKills(g)
				g.Expect(first).To(BeNumerically(">", 0), "the victim hits its memory limit")
			}, "10s", "100ms").Should(Succeed())
			for i := range 3 {
				bystanderWorks(fmt.Sprintf("during-pressure-%d", i))
			}
			Expect(getRun(ctx, hog)(Default).Status.Phase).To(Equal(afev1.RunRunning), "the pressure lasted through the bystander's Runs")
			Expect(oomKills(Default)).To(BeNumerically(">", first), "the victim sat at its limit, killed again and again, meanwhile")
			// Its deadline is the containment specs' matter: deleted here,
			// it is ended at once (a minute of the Serial specs less).
			Expect(k8sClient.Delete(ctx, hog)).To(Succeed())
			Eventually(func() bool {
				return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(hog), &afev1.Run{}))
			}, time.Minute).Should(BeTrue())
		})

		It("refuses a file larger than resources.fileSize with EFBIG", func() {
			big := newRun(ns, "bigfile", victim.Name)
			big.Spec.Script = `trap '' XFSZ; dd if=/dev/zero of=/workspace/big bs=1024 count=2048; rc=$?; wc -c < /workspace/big; exit $rc`
			Expect(k8sClient.Create(ctx, big)).To(Succeed())
			got := waitRunPhase(ctx, big, afev1.RunCompleted)
			Expect(got.Status.OK).To(HaveValue(BeFalse()))
			Expect(got.Status.Output).To(ContainSubstring("File too large"))
			Expect(got.Status.Output).To(ContainSubstring("1048576"))
		})

		It("kills a busy loop at resources.cpuSeconds of CPU time, and says why", func() {
			burner := newSandbox(ns, "burner")
			burner.Spec.Resources.CPUSeconds = 2
			burner.Spec.Runtime = runtime
			Expect(k8sClient.Create(ctx, burner)).To(Succeed())
			DeferCleanup(func() { deleteAndWaitGone(ctx, burner) })
			waitReady(ctx, burner)
			run := newRun(ns, "burn", burner.Name)
			// times prints the CPU time of the shell's children: the loop's.
			loop := `sh -c 'while :; do :; done'; rc=$?; times; exit $rc`
			deafLoop := `sh -c "trap '' XCPU; while :; do :; done"`
			// The loop is a child of the Run's shell: under runc and gVisor
			// alike every process of the command is held to the limit.
			run.Spec.Script = limitLine(runtime, "Max cpu time", "t") + "; " + loop
			// A loop the limit does not end ends at this deadline, and
			// fails the spec below.
			run.Spec.TimeoutSeconds = ptr.To[int32](30)
			Expect(k8sClient.Create(ctx, run)).To(Succeed())
			var got *afev1.Run
			Eventually(func(g Gomega) {
				got = getRun(ctx, run)(g)
				g.Expect(got.Status.Phase.Terminal()).To(BeTrue())
			}).Should(Succeed())
			Expect(got.Status.Phase).To(Equal(afev1.RunCompleted), "the CPU-seconds limit ended the loop before the deadline: %s",
				findCondition(got.Status.Conditions, afev1.RunCompletedCondition).Message)
			Expect(got.Status.ExitCode).To(HaveValue(BeEquivalentTo(128+24)), "SIGXCPU: %s", got.Status.Output)
			Expect(findCondition(got.Status.Conditions, afev1.RunCompletedCondition).Message).To(ContainSubstring("the CPU-seconds limit was reached"))
			lines := strings.Split(strings.TrimSpace(got.Status.Output), "\n")
			Expect(strings.Fields(lines[0])[3:5]).To(Equal([]string{"2", "3"}), "soft and hard limits: %s", lines[0])
			{
				// The second line of times: the children's user and system
				// time (gVisor's counted in ticks of its own, as exact here).
				var times []string
				for _, l := range lines {
					if regexp.MustCompile(`^\d+m[\d.]+s \d+m[\d.]+s$`).MatchString(l) {
						times = append(times, l)
					}
				}
				Expect(times).To(HaveLen(2), got.Status.Output)
				var um, us, sm, ss float64
				_, err := fmt.Sscanf(times[1], "%fm%fs %fm%fs", &um, &us, &sm, &ss)
				Expect(err).NotTo(HaveOccurred(), got.Status.Output)
				cpu := um*60 + us + sm*60 + ss
				GinkgoWriter.Printf("busy loop ended after %.2f s of CPU time (%d ms of wall time)\n", cpu, got.Status.DurationMilliseconds)
				Expect(cpu).To(BeNumerically("~", 2, 0.5), "killed near 2 s of CPU time")
			}

			By("holding each child of the command to it: two busy children, each stopped at its 2 s")
			two := newRun(ns, "burn-two", burner.Name)
			two.Spec.Script = `sh -c 'while :; do :; done' & a=$!; sh -c 'while :; do :; done' & b=$!; wait $a; ra=$?; wait $b; echo "children $ra $?"`
			two.Spec.TimeoutSeconds = ptr.To[int32](30)
			Expect(k8sClient.Create(ctx, two)).To(Succeed())
			got = waitRunPhase(ctx, two, afev1.RunCompleted)
			Expect(got.Status.Output).To(ContainSubstring("children 152 152"), "SIGXCPU for both: %s", got.Status.Output)

			By("killing one that ignores SIGXCPU a second later, and saying that may be why")
			deaf := newRun(ns, "burn-deaf", burner.Name)
			deaf.Spec.Script = deafLoop
			deaf.Spec.TimeoutSeconds = ptr.To[int32](30)
			Expect(k8sClient.Create(ctx, deaf)).To(Succeed())
			got = waitRunPhase(ctx, deaf, afev1.RunCompleted)
			Expect(got.Status.ExitCode).To(HaveValue(BeEquivalentTo(128+9)), "SIGKILL: %s", got.Status.Output)
			Expect(findCondition(got.Status.Conditions, afev1.RunCompletedCondition).Message).To(ContainSubstring("ignores SIGXCPU"))
		})

		It("limits open files to resources.openFiles", func() {
			files := newRun(ns, "files", victim.Name)
			// Descriptors are numbered below the limit: 63 is the last usable.
			files.Spec.Script = limitLine(runtime, "Max open files", "n") + `; (exec 63</dev/null) && echo fd-63-ok; (exec 64</dev/null) 2>/dev/null || { echo fd-64-refused; exit 1; }`
			Expect(k8sClient.Create(ctx, files)).To(Succeed())
			got := waitRunPhase(ctx, files, afev1.RunCompleted)
			Expect(strings.Fields(got.Status.Output)[3:5]).To(Equal([]string{"64", "64"}))
			Expect(got.Status.OK).To(HaveValue(BeFalse()), got.Status.Output)
			Expect(got.Status.Output).To(ContainSubstring("fd-63-ok\nfd-64-refused"))
		})
	})
})

// limitLine is a script printing the line of /proc/self/limits that starts
// with what ("Max cpu time", with the soft and hard limits as its 4th and
// 5th fields). gVisor's kernel has no /proc/self/limits: there the line
// is made of what the shell's ulimit (option opt) reads of the limits.
func limitLine(runtime, what, opt string) string {
	if userSpaceKernel(runtime) {
		return fmt.Sprintf(`echo "%s $(ulimit -S -%s) $(ulimit -H -%s)"`, what, opt, opt)
	}
	return fmt.Sprintf(`grep '%s' /proc/self/limits`, what)
}

// eventMessages are the messages of the object's Events with that reason.
func eventMessages(ctx context.Context, ns string, obj client.Object, reason string) []string {
	list := &corev1.EventList{}
	Expect(k8sClient.List(ctx, list, client.InNamespace(ns))).To(Succeed())
	var out []string
	for _, e := range list.Items {
		if e.InvolvedObject.UID == obj.GetUID() && e.Reason == reason {
			out = append(out, e.Message)
		}
	}
	return out
}

// hostileInputs counts the hostile specs tried, for the suite's report.
var hostileInputs int

var _ = Describe("Hostile specs", func() {
	var ctx context.Context
	var ns string
	BeforeEach(func() {
		ctx = context.Background()
		ns = newNamespace(ctx)
	})
	forEachRuntime(func(runtime string) {
		// sandboxUnder is a Sandbox under the runtime: a spec refused,
		// or failed, is so whatever the runtime.
		sandboxUnder := func(ns, name string) *afev1.Sandbox {
			sbx := newSandbox(ns, name)
			sbx.Spec.Runtime = runtime
			return sbx
		}

		manyEgress := func(n int) []afev1.EgressHost {
			out := make([]afev1.EgressHost, n)
			for i := range out {
				out[i] = afev1.EgressHost("h" + strconv.Itoa(i) + ".example.com")
			}
			return out
		}
		manyEnv := func(n int) []afev1.EnvVar {
			out := make([]afev1.EnvVar, n)
			for i := range out {
				out[i] = afev1.EnvVar{Name: "V" + strconv.Itoa(i), Value: "x"}
			}
			return out
		}

		DescribeTable("are refused at admission",
			func(mutate func(*afev1.Sandbox)) {
				hostileInputs++
				sbx := sandboxUnder(ns, "hostile")
				mutate(sbx)
				err := k8sClient.Create(ctx, sbx)
				Expect(err).To(HaveOccurred())
				Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
			},
			Entry("thousands of egress entries", func(s *afev1.Sandbox) { s.Spec.Egress = manyEgress(3000) }),
			Entry("65 egress entries", func(s *afev1.Sandbox) { s.Spec.Egress = manyEgress(65) }),
			Entry("a newline in egress", func(s *afev1.Sandbox) { s.Spec.Egress = []afev1.EgressHost{"a.com\nhttp_access allow all"} }),
			Entry("a space in egress", func(s *afev1.Sandbox) { s.Spec.Egress = []afev1.EgressHost{"a.com allow"} }),
			Entry("a unicode look-alike in egress", func(s *afev1.Sandbox) { s.Spec.Egress = []afev1.EgressHost{"exаmple.com"} }),
			Entry("a punycode-free IDN in egress", func(s *afev1.Sandbox) { s.Spec.Egress = []afev1.EgressHost{"bücher.de"} }),
			Entry("a duplicate egress entry", func(s *afev1.Sandbox) { s.Spec.Egress = []afev1.EgressHost{"a.com", "a.com"} }),
			Entry("a unicode look-alike env name", func(s *afev1.Sandbox) { s.Spec.Env = []afev1.EnvVar{{Name: "DОCKER_HOST", Value: "x"}} }),
			Entry("a newline in an env name", func(s *afev1.Sandbox) { s.Spec.Env = []afev1.EnvVar{{Name: "A\nB", Value: "x"}} }),
			Entry("a huge env list", func(s *afev1.Sandbox) { s.Spec.Env = manyEnv(300) }),
			Entry("a duplicate env name", func(s *afev1.Sandbox) { s.Spec.Env = []afev1.EnvVar{{Name: "A"}, {Name: "A"}} }),
			Entry("an env value over 32 KiB", func(s *afev1.Sandbox) {
				s.Spec.Env = []afev1.EnvVar{{Name: "A", Value: strings.Repeat("x", 40000)}}
			}),
			Entry("uid 0", func(s *afev1.Sandbox) { s.Spec.User = "0" }),
			Entry("uid 00", func(s *afev1.Sandbox) { s.Spec.User = "00" }),
			Entry("0:0", func(s *afev1.Sandbox) { s.Spec.User = "0:0" }),
			Entry("root", func(s *afev1.Sandbox) { s.Spec.User = "root" }),
			Entry("root's group", func(s *afev1.Sandbox) { s.Spec.User = "1000:0" }),
			Entry("a negative uid", func(s *afev1.Sandbox) { s.Spec.User = "-1" }),
			Entry("an upper-case image", func(s *afev1.Sandbox) { s.Spec.Image = "Busybox" }),
			Entry("an image with a space", func(s *afev1.Sandbox) { s.Spec.Image = "busybox latest" }),
			Entry("an image with a newline", func(s *afev1.Sandbox) { s.Spec.Image = "busybox\n--privileged" }),
			Entry("an image starting with a dash", func(s *afev1.Sandbox) { s.Spec.Image = "-v/:/host" }),
			Entry("a relative hostPath", func(s *afev1.Sandbox) {
				s.Spec.Workspace = afev1.WorkspaceSpec{Type: afev1.WorkspaceFolder, HostPath: "relative/dir"}
			}),
			Entry("a hostPath with a newline", func(s *afev1.Sandbox) {
				s.Spec.Workspace = afev1.WorkspaceSpec{Type: afev1.WorkspaceFolder, HostPath: "/srv\n/etc"}
			}),
			Entry("a scope with upper case", func(s *afev1.Sandbox) { s.Spec.Scope = "Main" }),
			Entry("pids over the maximum", func(s *afev1.Sandbox) { s.Spec.Resources.Pids = 1 << 20 }),
			Entry("a tiny file size", func(s *afev1.Sandbox) { s.Spec.Resources.FileSize = ptr.To(resource.MustParse("1Ki")) }),
		)

		DescribeTable("end in a clear condition and create nothing",
			func(mutate func(ns string, s *afev1.Sandbox), reason string) {
				hostileInputs++
				sbx := sandboxUnder(ns, "hostile")
				mutate(ns, sbx)
				Expect(k8sClient.Create(ctx, sbx)).To(Succeed())
				c := waitCondition(ctx, sbx, afev1.SandboxReadyCondition, metav1.ConditionFalse, reason)
				Expect(c.Message).NotTo(BeEmpty())
				Expect(getSandbox(ctx, sbx)(Default).Status.Phase).To(Equal(afev1.SandboxFailed))
				label := uidLabel(sbx)
				Consistently(func() ([]string, error) { return dockertest.Objects(label) }, "1s").Should(BeEmpty())
				deleteAndWaitGone(ctx, sbx)
			},
			Entry("a hostPath climbing out with ..", func(_ string, s *afev1.Sandbox) {
				s.Spec.Workspace = afev1.WorkspaceSpec{Type: afev1.WorkspaceFolder, HostPath: workspaceRoot + "/../../etc"}
			}, afev1.WorkspaceOutsideRootReason),
			Entry("a hostPath that is the root itself", func(_ string, s *afev1.Sandbox) {
				s.Spec.Workspace = afev1.WorkspaceSpec{Type: afev1.WorkspaceFolder, HostPath: workspaceRoot}
			}, afev1.WorkspaceOutsideRootReason),
			Entry("the Docker socket through a symlink inside the root", func(ns string, s *afev1.Sandbox) {
				link := workspaceRoot + "/" + ns + "/sock"
				Expect(os.MkdirAll(workspaceRoot+"/"+ns, 0o755)).To(Succeed())
				Expect(os.Symlink("/var/run/docker.sock", link)).To(Succeed())
				s.Spec.Workspace = afev1.WorkspaceSpec{Type: afev1.WorkspaceFolder, HostPath: link}
			}, afev1.WorkspaceSymlinkReason),
			Entry("a denied env name in lower case", func(_ string, s *afev1.Sandbox) {
				s.Spec.Env = []afev1.EnvVar{{Name: "kubeconfig", Value: "/root/.kube/config"}}
			}, afev1.DeniedEnvReason),
			Entry("a proxy variable", func(_ string, s *afev1.Sandbox) {
				s.Spec.Env = []afev1.EnvVar{{Name: "HTTPS_PROXY", Value: "http://evil:3128"}}
			}, afev1.InvalidSpecReason),
		)

		It("accepts names at the maximum length and derives valid Docker names", func() {
			hostileInputs++
			name := strings.Repeat("a", 253)
			sbx := sandboxUnder(ns, name)
			Expect(k8sClient.Create(ctx, sbx)).To(Succeed())
			got := waitReady(ctx, sbx)
			Expect(len(got.Status.ContainerName)).To(BeNumerically("<=", 104))
			label := uidLabel(sbx)
			deleteAndWaitGone(ctx, sbx)
			Expect(dockertest.Objects(label)).To(BeEmpty())
		})
	})
})

var _ = ReportAfterSuite("hostile inputs", func(Report) {
	GinkgoWriter.Printf("hostile specs tried through the API server: %d\n", hostileInputs)
})
