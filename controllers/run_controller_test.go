package controllers

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/test/dockertest"
)

func newRun(ns, name, sandbox string) *afev1.Run {
	return &afev1.Run{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       afev1.RunSpec{SandboxRef: afev1.SandboxReference{Name: sandbox}},
	}
}

func getRun(ctx context.Context, run *afev1.Run) func(Gomega) *afev1.Run {
	return func(g Gomega) *afev1.Run {
		got := &afev1.Run{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(run), got)).To(Succeed())
		return got
	}
}

// waitRunPhase waits until the Run reaches the phase.
func waitRunPhase(ctx context.Context, run *afev1.Run, phase afev1.RunPhase) *afev1.Run {
	return waitRunPhaseWithin(ctx, run, phase, 0)
}

// waitRunPhaseWithin is waitRunPhase with its own bound (0: the suite's).
func waitRunPhaseWithin(ctx context.Context, run *afev1.Run, phase afev1.RunPhase, within time.Duration) *afev1.Run {
	var got *afev1.Run
	wait := Eventually(func(g Gomega) {
		got = getRun(ctx, run)(g)
		g.Expect(got.Status.Phase).To(Equal(phase), "status: %+v", got.Status)
	})
	if within > 0 {
		wait = wait.WithTimeout(within)
	}
	wait.Should(Succeed())
	return got
}

// leftovers lists the processes in the container whose arguments contain
// the marker.
// leftovers are the processes of the container whose command line holds
// marker, as the host sees them: it works for images without ps.
func leftovers(container, marker string) []string {
	out, err := exec.Command("docker", "top", container, "-eo", "pid,args").CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), string(out))
	var found []string
	for _, line := range strings.Split(string(out), "\n")[1:] {
		if strings.Contains(line, marker) {
			found = append(found, strings.TrimSpace(line))
		}
	}
	return found
}

func eventReasons(ctx context.Context, ns string, obj client.Object) []string {
	list := &corev1.EventList{}
	Expect(k8sClient.List(ctx, list, client.InNamespace(ns))).To(Succeed())
	var reasons []string
	for _, e := range list.Items {
		if e.InvolvedObject.UID == obj.GetUID() {
			reasons = append(reasons, e.Reason)
		}
	}
	return reasons
}

var _ = Describe("Run", func() {
	var ctx context.Context
	var ns string
	var sbx *afev1.Sandbox
	BeforeEach(func() {
		ctx = context.Background()
		ns = newNamespace(ctx)
		sbx = newSandbox(ns, "runner")
		sbx.Spec.Env = []afev1.EnvVar{{Name: "WHO", Value: "sandbox"}}
		Expect(k8sClient.Create(ctx, sbx)).To(Succeed())
		sbx = waitReady(ctx, sbx)
	})
	AfterEach(func() { deleteAndWaitGone(ctx, sbx) })

	It("records exit 0, the output and the JSON result, with Events on the Run and the Sandbox", func() {
		run := newRun(ns, "json", sbx.Name)
		run.Spec.Script = `echo "hello $WHO from $(pwd) as $(id -u)"; echo '{"answer": 42, "list": [1, 2]}'; echo '{"final": "yes"}'; echo trailing`
		t0 := time.Now()
		Expect(k8sClient.Create(ctx, run)).To(Succeed())
		got := waitRunPhase(ctx, run, afev1.RunCompleted)
		GinkgoWriter.Printf("run creation to Completed: %s\n", time.Since(t0))
		Expect(got.Status.OK).To(HaveValue(BeTrue()))
		Expect(*got.Status.ExitCode).To(BeZero())
		Expect(got.Status.TimedOut).To(HaveValue(BeFalse()))
		Expect(got.Status.Attempts).To(Equal(int32(1)))
		user, _ := containerUser(sbx.Status.ContainerName)
		uid, _, _ := strings.Cut(user, ":") // the id allocated to it
		Expect(got.Status.Output).To(HavePrefix("hello sandbox from /workspace as " + uid + "\n"))
		Expect(got.Status.OutputTruncated).To(HaveValue(BeFalse()))
		Expect(got.Status.Result).To(HaveLen(1))
		Expect(string(got.Status.Result["final"].Raw)).To(Equal(`"yes"`))
		Expect(got.Status.StartTime).NotTo(BeNil())
		Expect(got.Status.CompletionTime).NotTo(BeNil())
		Expect(got.Status.DurationMilliseconds).To(BeNumerically(">=", 0))
		// The finalizer goes in a write of its own, after the outcome.
		Eventually(func(g Gomega) []string {
			cur := &afev1.Run{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(run), cur)).To(Succeed())
			return cur.Finalizers
		}).ShouldNot(ContainElement(afev1.RunFinalizer))
		Eventually(func() []string { return eventReasons(ctx, ns, got) }).Should(ContainElements("Started", "Completed"))
		Eventually(func() []string { return eventReasons(ctx, ns, sbx) }).Should(ContainElements("RunStarted", "RunCompleted"))

		By("refusing changes to the spec")
		// A merge patch carries no resourceVersion: the status writes that
		// may still follow cannot turn the refusal into a conflict.
		changed := got.DeepCopy()
		changed.Spec.Script = "echo changed"
		Expect(k8sClient.Patch(ctx, changed, client.MergeFrom(got))).To(MatchError(ContainSubstring("immutable")))
	})

	It("treats a non-zero exit as an outcome and keeps stderr", func() {
		run := newRun(ns, "exit3", sbx.Name)
		// Two streams are two pipes: writes milliseconds apart keep their order.
		run.Spec.Script = "echo to-stdout; sleep 0.2; echo to-stderr >&2; exit 3"
		Expect(k8sClient.Create(ctx, run)).To(Succeed())
		got := waitRunPhase(ctx, run, afev1.RunCompleted)
		Expect(got.Status.OK).To(HaveValue(BeFalse()))
		Expect(*got.Status.ExitCode).To(Equal(int32(3)))
		Expect(got.Status.Output).To(Equal("to-stdout\nto-stderr\n"))
		Expect(got.Status.Result).To(BeEmpty())
	})

	It("keeps the last 32 KiB of a 2 MiB output", func() {
		run := newRun(ns, "big", sbx.Name)
		run.Spec.Script = `i=0; while [ $i -lt 32768 ]; do echo "line $i ................................................"; i=$((i+1)); done; echo THE-END`
		Expect(k8sClient.Create(ctx, run)).To(Succeed())
		got := waitRunPhase(ctx, run, afev1.RunCompleted)
		Expect(got.Status.OutputTruncated).To(HaveValue(BeTrue()))
		Expect(len(got.Status.Output)).To(Equal(afev1.RunOutputLimit))
		Expect(got.Status.Output).To(HaveSuffix("line 32767 ................................................\nTHE-END\n"))
	})

	DescribeTable("kills the command and everything it started at the deadline",
		func(image string, command []string, script string, markers []string) {
			in := sbx
			if image != "" {
				skip, err := dockertest.RequireImage(image)
				Expect(err).NotTo(HaveOccurred())
				if skip != "" {
					Skip(skip)
				}
				in = newSandbox(ns, "bare")
				in.Spec.Image = image
				Expect(k8sClient.Create(ctx, in)).To(Succeed())
				in = waitReady(ctx, in)
				defer deleteAndWaitGone(ctx, in)
			}
			run := newRun(ns, "timeout", in.Name)
			run.Spec.Command, run.Spec.Script = command, script
			run.Spec.TimeoutSeconds = ptr.To[int32](4)
			Expect(k8sClient.Create(ctx, run)).To(Succeed())
			waitRunPhase(ctx, run, afev1.RunRunning)
			// Each process, by a marker of its own, runs before the
			// deadline: their absence afterwards is the kill's doing.
			for _, m := range markers {
				Eventually(func() []string { return leftovers(in.Status.ContainerName, m) }, "3s", "50ms").
					ShouldNot(BeEmpty(), "%q runs while the Run does", m)
			}
			got := waitRunPhase(ctx, run, afev1.RunTimedOut)
			Expect(got.Status.TimedOut).To(HaveValue(BeTrue()))
			Expect(got.Status.OK).To(HaveValue(BeFalse()))
			Expect(*got.Status.ExitCode).To(Equal(int32(137)))
			Expect(got.Status.DurationMilliseconds).To(BeNumerically(">=", 4000))
			Expect(got.Status.DurationMilliseconds).To(BeNumerically("<", 20000))
			for _, m := range markers {
				Expect(leftovers(in.Status.ContainerName, m)).To(BeEmpty(), "%q is gone", m)
			}
			Expect(got.Status.Attempts).To(Equal(int32(1)), "a timed out Run is not retried")
			Eventually(func() []string { return eventReasons(ctx, ns, got) }).Should(ContainElement(afev1.TimedOutReason))
			Eventually(func() []string { return eventReasons(ctx, ns, in) }).Should(ContainElement("RunTimedOut"))
		},
		Entry("a shell with a background child", "", nil, "sleep 1000 & sleep 1009", []string{"sleep 1000", "sleep 1009"}),
		Entry("daemons that setsid, clear their environment or ignore hangups", "", nil,
			"setsid sleep 1001 & (env -i sleep 1002 &) ; (trap '' HUP; exec sleep 1003) >/dev/null 2>&1 </dev/null & sleep 1000",
			[]string{"sleep 1001", "sleep 1002", "sleep 1003", "sleep 1000"}),
		Entry("a command without a shell", "", []string{"sleep", "1000"}, "", []string{"sleep 1000"}),
		Entry("an image with nothing but /bin/sh (no sleep, kill or ps)", dockertest.ShellOnlyImage, nil,
			"while :; do : spin1; done & (while :; do : spin2; done &); while :; do : spin3; done", []string{": spin1", ": spin2", ": spin3"}),
	)

	It("kills what a finished command left running in the background", func() {
		run := newRun(ns, "bg", sbx.Name)
		run.Spec.Script = "setsid sleep 1004 >/dev/null 2>&1 < /dev/null & echo started; sleep 2"
		Expect(k8sClient.Create(ctx, run)).To(Succeed())
		waitRunPhase(ctx, run, afev1.RunRunning)
		Eventually(func() []string { return leftovers(sbx.Status.ContainerName, "sleep 1004") }, "2s", "50ms").
			ShouldNot(BeEmpty(), "the daemon runs while the Run does")
		got := waitRunPhase(ctx, run, afev1.RunCompleted)
		Expect(got.Status.OK).To(HaveValue(BeTrue()))
		Expect(leftovers(sbx.Status.ContainerName, "sleep 1004")).To(BeEmpty())
	})

	It("runs several Runs in one sandbox at once", func() {
		// Each Run waits until all three have started: they can only all
		// succeed when they run at the same time.
		for i := 0; i < 3; i++ {
			run := newRun(ns, fmt.Sprintf("parallel-%d", i), sbx.Name)
			run.Spec.Script = fmt.Sprintf(`touch /tmp/parallel-%d; t=0
while [ "$(ls /tmp/parallel-* | wc -l)" -lt 3 ]; do sleep 0.1; t=$((t+1)); [ $t -gt 300 ] && exit 1; done; echo together`, i)
			Expect(k8sClient.Create(ctx, run)).To(Succeed())
		}
		for i := 0; i < 3; i++ {
			got := waitRunPhase(ctx, newRun(ns, fmt.Sprintf("parallel-%d", i), sbx.Name), afev1.RunCompleted)
			Expect(got.Status.OK).To(HaveValue(BeTrue()), got.Status.Output)
		}
	})

	It("fails a command that cannot be executed", func() {
		run := newRun(ns, "nobinary", sbx.Name)
		run.Spec.Command = []string{"/no/such/binary"}
		Expect(k8sClient.Create(ctx, run)).To(Succeed())
		got := waitRunPhase(ctx, run, afev1.RunFailed)
		c := findCondition(got.Status.Conditions, afev1.RunCompletedCondition)
		Expect(c.Reason).To(Equal(afev1.ExecFailedReason))
		Expect(c.Message).To(ContainSubstring("could not be executed"))
	})

	It("executes again in the new container when the sandbox is lost mid-run", func() {
		run := newRun(ns, "lost", sbx.Name)
		run.Spec.Script = `if [ -e /workspace/seen ]; then echo '{"again": true}'; exit 0; fi; touch /workspace/seen; sleep 1000`
		Expect(k8sClient.Create(ctx, run)).To(Succeed())
		waitRunPhase(ctx, run, afev1.RunRunning)
		Eventually(func() []string { return leftovers(sbx.Status.ContainerName, "sleep 1000") }).ShouldNot(BeEmpty())
		Expect(dockertest.RemoveContainer(sbx.Status.ContainerName)).To(Succeed())
		// The fresh workspace no longer has the marker, so the new attempt
		// sleeps too. An attempt begun in the dying container before the
		// loss was recorded is lost as well: at least two attempts.
		var cur *afev1.Sandbox
		Eventually(func(g Gomega) {
			cur = getSandbox(ctx, sbx)(g)
			g.Expect(cur.Status.ContainerID).NotTo(Equal(sbx.Status.ContainerID))
			g.Expect(cur.Status.Recreations).To(Equal(int32(1)))
			got := getRun(ctx, run)(g)
			g.Expect(got.Status.Attempts).To(BeNumerically(">=", 2))
			g.Expect(got.Status.Phase).To(Equal(afev1.RunRunning))
			g.Expect(got.Status.ContainerID).To(Equal(cur.Status.ContainerID))
		}).Should(Succeed())
		Eventually(func() []string { return leftovers(cur.Status.ContainerName, "sleep 1000") }).ShouldNot(BeEmpty())
	})

	It("waits for a missing sandbox and runs when it appears", func() {
		run := newRun(ns, "early", "later")
		run.Spec.Command = []string{"echo", `{"late": true}`}
		Expect(k8sClient.Create(ctx, run)).To(Succeed())
		got := waitRunPhase(ctx, run, afev1.RunPending)
		c := findCondition(got.Status.Conditions, afev1.RunSandboxReadyCondition)
		Expect(c.Reason).To(Equal(afev1.SandboxNotReadyReason))
		Expect(c.Message).To(ContainSubstring("does not exist"))
		Consistently(func(g Gomega) afev1.RunPhase { return getRun(ctx, run)(g).Status.Phase }, "1s").Should(Equal(afev1.RunPending))

		later := newSandbox(ns, "later")
		Expect(k8sClient.Create(ctx, later)).To(Succeed())
		got = waitRunPhase(ctx, run, afev1.RunCompleted)
		Expect(string(got.Status.Result["late"].Raw)).To(Equal("true"))
		deleteAndWaitGone(ctx, later)
	})

	It("fails when its sandbox is deleted", func() {
		other := newSandbox(ns, "doomed")
		Expect(k8sClient.Create(ctx, other)).To(Succeed())
		other = waitReady(ctx, other)
		run := newRun(ns, "orphaned", other.Name)
		run.Spec.Command = []string{"sleep", "1000"}
		Expect(k8sClient.Create(ctx, run)).To(Succeed())
		waitRunPhase(ctx, run, afev1.RunRunning)
		deleteAndWaitGone(ctx, other)
		got := waitRunPhase(ctx, run, afev1.RunFailed)
		Expect(findCondition(got.Status.Conditions, afev1.RunCompletedCondition).Reason).To(Equal(afev1.SandboxDeletedReason))
	})

	It("refuses a Run with both or neither of command and script", func() {
		both := newRun(ns, "both", sbx.Name)
		both.Spec.Command, both.Spec.Script = []string{"true"}, "true"
		Expect(k8sClient.Create(ctx, both)).To(MatchError(ContainSubstring("exactly one of command, script and builtin")))
		Expect(k8sClient.Create(ctx, newRun(ns, "neither", sbx.Name))).To(MatchError(ContainSubstring("exactly one of command, script and builtin")))
	})
})

func findCondition(conds []metav1.Condition, t string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

var _ = Describe("Run latency", func() {
	It("measures a Run of true against docker exec of true", func() {
		ctx := context.Background()
		ns := newNamespace(ctx)
		sbx := newSandbox(ns, "latency")
		Expect(k8sClient.Create(ctx, sbx)).To(Succeed())
		sbx = waitReady(ctx, sbx)
		defer deleteAndWaitGone(ctx, sbx)

		const n = 10
		var runs, execs []time.Duration
		for i := 0; i < n; i++ {
			run := newRun(ns, fmt.Sprintf("true-%d", i), sbx.Name)
			run.Spec.Command = []string{"true"}
			t0 := time.Now()
			Expect(k8sClient.Create(ctx, run)).To(Succeed())
			Eventually(func(g Gomega) afev1.RunPhase { return getRun(ctx, run)(g).Status.Phase }).
				WithPolling(5 * time.Millisecond).Should(Equal(afev1.RunCompleted))
			runs = append(runs, time.Since(t0))

			t0 = time.Now()
			_, err := dockertest.Exec(sbx.Status.ContainerName, "true")
			Expect(err).NotTo(HaveOccurred())
			execs = append(execs, time.Since(t0))
		}
		runMedian, execMedian := median(runs), median(execs)
		GinkgoWriter.Printf("Run of true, creation to Completed: median %s; docker exec C true: median %s; ratio %.2f\n",
			runMedian, execMedian, float64(runMedian)/float64(execMedian))
		Expect(runMedian).To(BeNumerically("<", 10*time.Second), "a generous bound")
	})
})

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration{}, ds...)
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s[len(s)/2]
}
