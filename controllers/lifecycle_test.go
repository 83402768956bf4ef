package controllers

import (
	"context"
	"os/exec"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/test/dockertest"
)

// waitSuspended waits until the sandbox reports Suspended and its container
// (and proxy, when it has one) exists stopped; it returns the Sandbox.
func waitSuspended(ctx context.Context, sbx *afev1.Sandbox) *afev1.Sandbox {
	var got *afev1.Sandbox
	Eventually(func(g Gomega) {
		got = getSandbox(ctx, sbx)(g)
		g.Expect(got.Status.Phase).To(Equal(afev1.SandboxSuspended), "conditions: %+v", got.Status.Conditions)
		ready := meta.FindStatusCondition(got.Status.Conditions, afev1.SandboxReadyCondition)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ready.Reason).To(Equal(afev1.SuspendedReason))
		c, err := dockertest.Inspect(got.Status.ContainerName)
		g.Expect(err).NotTo(HaveOccurred(), "the container of a suspended sandbox is kept")
		g.Expect(c.State.Running).To(BeFalse())
	}).Should(Succeed())
	return got
}

// containerRunning is whether the named container runs ("" when it does
// not exist).
func containerRunning(name string) string {
	out, err := exec.Command("docker", "inspect", "-f", "{{.State.Running}}", name).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

func idleSandbox(ns, name string, idle int64) *afev1.Sandbox {
	sbx := newSandbox(ns, name)
	sbx.Spec.Lifecycle = &afev1.SandboxLifecycle{IdleTimeoutSeconds: idle}
	return sbx
}

var _ = Describe("Sandbox lifecycle", func() {
	var ctx context.Context
	var ns string
	BeforeEach(func() {
		ctx = context.Background()
		ns = newNamespace(ctx)
	})

	// Suspending stops the container and resuming starts the same one
	// again: under gVisor a new user-space kernel boots over the kept
	// container and workspace.
	forEachRuntime(func(runtime string) {
		It("suspends an idle sandbox after its timeout, never under a Run or an exec, and resumes it for a Run", func() {
			sbx := idleSandbox(ns, "idle", 3)
			sbx.Spec.Runtime = runtime
			Expect(k8sClient.Create(ctx, sbx)).To(Succeed())
			DeferCleanup(deleteAndWaitGone, ctx, sbx)
			// The Run, Pending until the sandbox is Ready, keeps it up from the
			// start: on a loaded machine Ready may come near the idle timeout.
			long := newRun(ns, "long", sbx.Name)
			long.Spec.Script = "sleep 6; echo done"
			Expect(k8sClient.Create(ctx, long)).To(Succeed())
			got := waitReady(ctx, sbx)
			name, id := got.Status.ContainerName, got.Status.ContainerID
			_, err := dockertest.Exec(name, "sh", "-c", "echo kept > /workspace/mark; echo kept > /tmp/rootmark")
			Expect(err).NotTo(HaveOccurred())

			By("keeping it up under a Run longer than the idle timeout")
			waitRunPhase(ctx, long, afev1.RunRunning)
			Consistently(func() string { return containerRunning(name) }, 4*time.Second, 200*time.Millisecond).Should(Equal("true"))
			waitRunPhase(ctx, long, afev1.RunCompleted)

			By("keeping it up under an exec longer than the idle timeout")
			shell := exec.Command("docker", "exec", name, "sleep", "6")
			Expect(shell.Start()).To(Succeed())
			DeferCleanup(func() { _ = shell.Process.Kill(); _ = shell.Wait() })
			Consistently(func() string { return containerRunning(name) }, 5*time.Second, 200*time.Millisecond).Should(Equal("true"))
			Expect(shell.Wait()).To(Succeed(), "the exec ran to its end")
			execEnded := time.Now()

			By("suspending it once idle for the timeout: container and proxy stopped, workspace kept")
			got = waitSuspended(ctx, sbx)
			idleFor := time.Since(execEnded)
			GinkgoWriter.Printf("suspended %s after the last exec ended (idle timeout 3s)\n", idleFor)
			Expect(idleFor).To(BeNumerically(">=", 2*time.Second), "not before the timeout (at the second the status keeps)")
			Expect(got.Status.SuspendedTime).NotTo(BeNil())
			Expect(got.Status.LastActivityTime).NotTo(BeNil())
			Expect(got.Status.ContainerID).To(Equal(id))
			Expect(exec.Command("docker", "volume", "inspect", got.Status.VolumeName).Run()).To(Succeed())
			Eventually(func() []string { return eventReasons(ctx, ns, got) }).Should(ContainElement(afev1.SuspendedReason))

			By("not treating its stopped container as a loss: started behind its back, it is stopped again, not recreated")
			Expect(exec.Command("docker", "start", name).Run()).To(Succeed())
			Eventually(func() string { return containerRunning(name) }).Should(Equal("false"))
			Expect(exec.Command("docker", "stop", name).Run()).To(Succeed())
			Consistently(func(g Gomega) {
				cur := getSandbox(ctx, sbx)(g)
				g.Expect(cur.Status.Recreations).To(BeZero())
				g.Expect(cur.Status.Phase).To(Equal(afev1.SandboxSuspended))
			}, 2*time.Second, 200*time.Millisecond).Should(Succeed())
			c, err := dockertest.Inspect(name)
			Expect(err).NotTo(HaveOccurred())
			Expect(c.ID).To(Equal(id))

			By("resuming it for a new Run, which completes in the same container and workspace")
			t0 := time.Now()
			run := newRun(ns, "after", sbx.Name)
			run.Spec.Script = "cat /workspace/mark"
			Expect(k8sClient.Create(ctx, run)).To(Succeed())
			done := waitRunPhase(ctx, run, afev1.RunCompleted)
			GinkgoWriter.Printf("Run on a suspended sandbox: created to completed in %s\n", time.Since(t0))
			Expect(done.Status.Output).To(Equal("kept\n"))
			Expect(done.Status.StartTime.Sub(t0)).To(BeNumerically("<", 10*time.Second))
			got = getSandbox(ctx, sbx)(Default)
			Expect(got.Status.ContainerID).To(Equal(id), "resumed, not recreated")
			Expect(engineRuntime(name)).To(Equal(runtime))
			By("keeping the root filesystem's writes across the suspension under runc; under gVisor only the workspace's")
			// gVisor keeps the root's writes in its kernel's memory (an
			// overlay of its own over the image), which ends with the stop.
			out, err := dockertest.Exec(name, "cat", "/tmp/rootmark")
			if userSpaceKernel(runtime) {
				Expect(err).To(HaveOccurred(), out)
				Expect(out).To(ContainSubstring("No such file"))
			} else {
				Expect(err).NotTo(HaveOccurred(), out)
				Expect(out).To(Equal("kept"))
			}
			Expect(got.Status.Recreations).To(BeZero())
			Expect(got.Status.SuspendedTime).To(BeNil())
			Eventually(func() []string { return eventReasons(ctx, ns, got) }).Should(ContainElement(afev1.ResumedReason))

			By("suspending it again once idle after the Run")
			waitSuspended(ctx, sbx)
		})

		It("suspends and resumes on spec.suspend, proxy included, and recreates a spec that drifted meanwhile", func() {
			sbx := newSandbox(ns, "explicit")
			sbx.Spec.Runtime = runtime
			sbx.Spec.Egress = []afev1.EgressHost{"allowed.test"}
			Expect(k8sClient.Create(ctx, sbx)).To(Succeed())
			DeferCleanup(deleteAndWaitGone, ctx, sbx)
			got := waitReady(ctx, sbx)
			name, id, proxy, network := got.Status.ContainerName, got.Status.ContainerID, got.Status.ProxyName, got.Status.NetworkName

			suspend := func(on bool) {
				Eventually(func() error {
					cur := getSandbox(ctx, sbx)(Default)
					cur.Spec.Suspend = on
					return k8sClient.Update(ctx, cur)
				}).Should(Succeed())
			}
			suspend(true)
			got = waitSuspended(ctx, sbx)
			Expect(containerRunning(proxy)).To(Equal("false"))
			Expect(exec.Command("docker", "network", "inspect", network).Run()).To(Succeed(), "the network is kept")
			Expect(meta.FindStatusCondition(got.Status.Conditions, afev1.EgressReadyCondition).Reason).To(Equal(afev1.SuspendedReason))

			By("keeping a Run Pending while spec.suspend is true")
			run := newRun(ns, "waits", sbx.Name)
			run.Spec.Command = []string{"true"}
			Expect(k8sClient.Create(ctx, run)).To(Succeed())
			Consistently(func(g Gomega) {
				g.Expect(getRun(ctx, run)(g).Status.Phase).To(Or(BeEmpty(), Equal(afev1.RunPending)))
			}, 2*time.Second, 200*time.Millisecond).Should(Succeed())
			Expect(containerRunning(name)).To(Equal("false"))

			By("resuming on spec.suspend=false: the same container and proxy, and the Run then runs")
			suspend(false)
			got = waitReady(ctx, sbx)
			Expect(got.Status.ContainerID).To(Equal(id))
			// The proxy may be made again meanwhile, when the host's
			// addresses grew (another spec's network): it runs again soon.
			Eventually(func() string { return containerRunning(proxy) }, "20s").Should(Equal("true"))
			waitRunPhase(ctx, run, afev1.RunCompleted)

			By("interrupting a Run in flight on spec.suspend: it is executed again once resumed")
			inflight := newRun(ns, "inflight", sbx.Name)
			inflight.Spec.Script = "if [ -f /workspace/first ]; then echo again; else touch /workspace/first; sleep 120; fi"
			Expect(k8sClient.Create(ctx, inflight)).To(Succeed())
			waitRunPhase(ctx, inflight, afev1.RunRunning)
			// Running is written before the exec starts: suspend once the
			// first attempt has made its mark.
			Eventually(func() error { _, err := dockertest.Exec(name, "test", "-f", "/workspace/first"); return err }, "20s").Should(Succeed())
			suspend(true)
			waitSuspended(ctx, sbx)
			Eventually(func(g Gomega) {
				g.Expect(getRun(ctx, inflight)(g).Status.Phase).To(Equal(afev1.RunPending))
			}).Should(Succeed())
			suspend(false)
			again := waitRunPhase(ctx, inflight, afev1.RunCompleted)
			Expect(again.Status.Output).To(Equal("again\n"))
			Expect(again.Status.Attempts).To(Equal(int32(2)))

			By("recreating on resume a container whose spec changed while suspended, keeping the workspace")
			_, err := dockertest.Exec(name, "sh", "-c", "echo kept > /workspace/mark")
			Expect(err).NotTo(HaveOccurred())
			suspend(true)
			waitSuspended(ctx, sbx)
			Eventually(func() error {
				cur := getSandbox(ctx, sbx)(Default)
				cur.Spec.Resources.Pids = 65
				cur.Spec.Suspend = false
				return k8sClient.Update(ctx, cur)
			}).Should(Succeed())
			got = waitReady(ctx, sbx)
			Expect(got.Status.ContainerID).NotTo(Equal(id))
			Expect(got.Status.Recreations).To(BeZero(), "a drift, not a loss")
			out, err := dockertest.Exec(name, "sh", "-c", "cat /workspace/mark")
			Expect(err).NotTo(HaveOccurred())
			Expect(out).To(Equal("kept"))
			// The changed limit: the pids cgroup under runc; under gVisor the
			// workload's RLIMIT_NPROC (the host's limit is gVisor's own).
			if userSpaceKernel(runtime) {
				out, err := dockertest.Exec(name, "sh", "-c", "ulimit -u")
				Expect(err).NotTo(HaveOccurred())
				Expect(out).To(Equal("65"), "the changed spec")
			} else {
				c, err := dockertest.Inspect(name)
				Expect(err).NotTo(HaveOccurred())
				Expect(*c.HostConfig.PidsLimit).To(Equal(int64(65)), "the changed spec")
			}
		})

		It("keeps the sandboxes of a Paused ticket running past their idle timeout, and keeps spec.suspend on a ticket's sandbox", func() {
			tk := &afev1.Ticket{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "paused"},
				Spec: afev1.TicketSpec{
					Lifecycle: &afev1.SandboxLifecycle{IdleTimeoutSeconds: 2},
					Sandbox:   newSandbox(ns, "x").Spec.SandboxTemplateSpec,
				},
			}
			tk.Spec.Sandbox.Runtime = runtime
			Expect(k8sClient.Create(ctx, tk)).To(Succeed())
			DeferCleanup(func() {
				Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, tk))).To(Succeed())
			})
			sbx := &afev1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tk.Name}}
			got := waitReady(ctx, sbx)
			Expect(got.Spec.Lifecycle.IdleTimeoutSeconds).To(Equal(int64(2)), "the ticket's idle timeout is its sandbox's")
			Eventually(func() error {
				cur := &afev1.Ticket{}
				Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(tk), cur)).To(Succeed())
				cur.Spec.State = afev1.TicketPaused
				return k8sClient.Update(ctx, cur)
			}).Should(Succeed())
			// Paused before the timeout ran out (or resumed for it when not).
			Eventually(func(g Gomega) {
				cur := &afev1.Ticket{}
				g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(tk), cur)).To(Succeed())
				g.Expect(cur.Status.Phase).To(Equal(afev1.TicketPausedPhase))
			}).Should(Succeed())
			run := newRun(ns, "wake", sbx.Name)
			run.Spec.Command = []string{"true"}
			Expect(k8sClient.Create(ctx, run)).To(Succeed())
			waitRunPhase(ctx, run, afev1.RunCompleted)
			Consistently(func() string { return containerRunning(got.Status.ContainerName) }, 4*time.Second, 200*time.Millisecond).Should(Equal("true"))

			By("suspending the ticket's sandbox explicitly: the ticket keeps the user's spec.suspend")
			Eventually(func() error {
				cur := getSandbox(ctx, sbx)(Default)
				cur.Spec.Suspend = true
				return k8sClient.Update(ctx, cur)
			}).Should(Succeed())
			waitSuspended(ctx, sbx)
			Eventually(func() error {
				cur := &afev1.Ticket{}
				Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(tk), cur)).To(Succeed())
				cur.Spec.State = afev1.TicketActive
				return k8sClient.Update(ctx, cur)
			}).Should(Succeed())
			Eventually(func(g Gomega) {
				cur := &afev1.Ticket{}
				g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(tk), cur)).To(Succeed())
				g.Expect(cur.Status.Phase).NotTo(Equal(afev1.TicketPausedPhase))
			}).Should(Succeed())
			Consistently(func(g Gomega) {
				cur := getSandbox(ctx, sbx)(g)
				g.Expect(cur.Spec.Suspend).To(BeTrue(), "the active ticket keeps the user's spec.suspend")
				g.Expect(cur.Status.Phase).To(Equal(afev1.SandboxSuspended))
			}, 3*time.Second, 200*time.Millisecond).Should(Succeed())
		})
	})
})

var _ = Describe("Ticket deadlines and expiry", func() {
	var ctx context.Context
	var ns string
	BeforeEach(func() {
		ctx = context.Background()
		ns = newNamespace(ctx)
	})

	getTicket := func(tk *afev1.Ticket) func(Gomega) *afev1.Ticket {
		return func(g Gomega) *afev1.Ticket {
			got := &afev1.Ticket{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(tk), got)).To(Succeed())
			return got
		}
	}

	It("ends a ticket past its activeDeadlineSeconds Failed with reason DeadlineExceeded, fails its Run in flight and cleans up", func() {
		tk := &afev1.Ticket{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "deadline"},
			Spec: afev1.TicketSpec{
				// Long enough for the sandbox to be Ready and the Run to
				// start first on a loaded machine (seen: 6 s ran out
				// before the container had started).
				Lifecycle: &afev1.SandboxLifecycle{ActiveDeadlineSeconds: 20},
				Sandbox:   newSandbox(ns, "x").Spec.SandboxTemplateSpec,
			},
		}
		Expect(k8sClient.Create(ctx, tk)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, tk))).To(Succeed()) })
		sbx := &afev1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tk.Name}}
		got := waitReady(ctx, sbx)
		label := uidLabel(got)
		run := newRun(ns, "forever", sbx.Name)
		run.Spec.Script = "sleep 300"
		Expect(k8sClient.Create(ctx, run)).To(Succeed())
		waitRunPhase(ctx, run, afev1.RunRunning)

		var done *afev1.Ticket
		Eventually(func(g Gomega) {
			done = getTicket(tk)(g)
			g.Expect(done.Status.Phase).To(Equal(afev1.TicketFinished))
		}, 90*time.Second).Should(Succeed())
		created := done.CreationTimestamp.Time
		Expect(done.Status.FinishedTime.Sub(created)).To(BeNumerically(">=", 19*time.Second), "not before the deadline")
		Expect(done.Spec.State).To(Equal(afev1.TicketActive), "the user's spec is left as it is")
		failed := meta.FindStatusCondition(done.Status.Conditions, afev1.TicketFailedCondition)
		Expect(failed).NotTo(BeNil())
		Expect(failed.Status).To(Equal(metav1.ConditionTrue))
		Expect(failed.Reason).To(Equal(afev1.DeadlineExceededReason))
		Expect(meta.IsStatusConditionTrue(done.Status.Conditions, afev1.TicketCleanedUpCondition)).To(BeTrue())
		Eventually(func() []string { return eventReasons(ctx, ns, done) }).Should(ContainElement(afev1.DeadlineExceededReason))

		ended := waitRunPhase(ctx, run, afev1.RunFailed)
		Expect(meta.FindStatusCondition(ended.Status.Conditions, afev1.RunCompletedCondition).Reason).To(Equal(afev1.TicketFinishedReason))
		Eventually(func() ([]string, error) { return dockertest.Objects(label) }).Should(BeEmpty())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(sbx), &afev1.Sandbox{}))
		}).Should(BeTrue(), "the sandbox is deleted")
	})

	It("stops a sandbox past its own activeDeadlineSeconds and fails its waiting Runs, and starts it again for a longer one", func() {
		sbx := newSandbox(ns, "sbx-deadline")
		sbx.Spec.Lifecycle = &afev1.SandboxLifecycle{ActiveDeadlineSeconds: 12}
		Expect(k8sClient.Create(ctx, sbx)).To(Succeed())
		DeferCleanup(deleteAndWaitGone, ctx, sbx)
		got := waitReady(ctx, sbx)
		Eventually(func(g Gomega) {
			cur := getSandbox(ctx, sbx)(g)
			g.Expect(cur.Status.Phase).To(Equal(afev1.SandboxFailed))
			ready := meta.FindStatusCondition(cur.Status.Conditions, afev1.SandboxReadyCondition)
			g.Expect(ready.Reason).To(Equal(afev1.DeadlineExceededReason))
		}).Should(Succeed())
		Expect(containerRunning(got.Status.ContainerName)).To(Equal("false"))
		run := newRun(ns, "late", sbx.Name)
		run.Spec.Command = []string{"true"}
		Expect(k8sClient.Create(ctx, run)).To(Succeed())
		ended := waitRunPhase(ctx, run, afev1.RunFailed)
		Expect(meta.FindStatusCondition(ended.Status.Conditions, afev1.RunCompletedCondition).Reason).To(Equal(afev1.DeadlineExceededReason))

		By("a longer deadline starts the same container again: no loss")
		Eventually(func() error {
			cur := getSandbox(ctx, sbx)(Default)
			cur.Spec.Lifecycle.ActiveDeadlineSeconds = 3600
			return k8sClient.Update(ctx, cur)
		}).Should(Succeed())
		again := waitReady(ctx, sbx)
		Expect(again.Status.ContainerID).To(Equal(got.Status.ContainerID))
		Expect(again.Status.Recreations).To(BeZero())
	})

	It("deletes ended Runs and finished Tickets after ttlSecondsAfterFinished, through their finalizers", func() {
		tk := &afev1.Ticket{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ttl"},
			Spec: afev1.TicketSpec{
				TTLSecondsAfterFinished: ptrTo(int32(2)),
				Sandbox:                 newSandbox(ns, "x").Spec.SandboxTemplateSpec,
			},
		}
		Expect(k8sClient.Create(ctx, tk)).To(Succeed())
		sbx := &afev1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tk.Name}}
		got := waitReady(ctx, sbx)
		label := uidLabel(got)

		kept := newRun(ns, "kept", sbx.Name)
		kept.Spec.Command = []string{"true"}
		short := newRun(ns, "short", sbx.Name)
		short.Spec.Command = []string{"true"}
		// completionTime is kept to the second: a TTL of 3 s leaves at
		// least 2 s to see the Run Completed.
		short.Spec.TTLSecondsAfterFinished = ptrTo(int32(3))
		Expect(k8sClient.Create(ctx, kept)).To(Succeed())
		Expect(k8sClient.Create(ctx, short)).To(Succeed())
		ended := waitRunPhase(ctx, short, afev1.RunCompleted)
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(short), &afev1.Run{}))
		}).Should(BeTrue())
		gone := time.Now()
		Expect(gone.Sub(ended.Status.CompletionTime.Time)).To(BeNumerically(">=", 3*time.Second), "not before its TTL")
		waitRunPhase(ctx, kept, afev1.RunCompleted)
		Consistently(func() error {
			return k8sClient.Get(ctx, client.ObjectKeyFromObject(kept), &afev1.Run{})
		}, 2*time.Second, 200*time.Millisecond).Should(Succeed(), "a Run without a TTL is kept (no --finished-ttl here)")

		Eventually(func() error {
			cur := getTicket(tk)(Default)
			cur.Spec.State = afev1.TicketDone
			return k8sClient.Update(ctx, cur)
		}).Should(Succeed())
		var finished time.Time
		Eventually(func(g Gomega) {
			cur := getTicket(tk)(g)
			g.Expect(cur.Status.Phase).To(Equal(afev1.TicketFinished))
			finished = cur.Status.FinishedTime.Time
		}).Should(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(tk), &afev1.Ticket{}))
		}).Should(BeTrue())
		Expect(time.Since(finished)).To(BeNumerically(">=", 2*time.Second), "not before its TTL")
		Eventually(func() ([]string, error) { return dockertest.Objects(label) }).Should(BeEmpty())
	})
})

func ptrTo[T any](v T) *T { return &v }
