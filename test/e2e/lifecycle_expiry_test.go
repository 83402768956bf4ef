package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
	"github.com/onsi/gomega/gexec"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/test/dockertest"
)

// A control plane and a manager of the test's own, so that --finished-ttl
// applies to every Run and Ticket here and to nothing of the other specs;
// names no other spec uses (ownPlane).
var _ = Describe("Deadlines, expiry and idle suspension through kubectl and the plugin", ownPlane, func() {
	It("ends a ticket at its deadline, expires finished Tickets and Runs, never suspends under a Run, and keeps a suspended container stopped", func() {
		const (
			finishedTTL = 15 * time.Second
			deadline    = 15 // the ticket's activeDeadlineSeconds
			idle        = 6  // the sandbox's idleTimeoutSeconds
			keptTTL     = 30 // the ttlSecondsAfterFinished of a Run of its own
		)
		began := time.Now()
		own := ownControlPlane()
		defer func() { Expect(own.Stop()).To(Succeed()) }()
		inst := fmt.Sprintf("e2e-expiry-%d", os.Getpid())
		instLabel := afev1.LabelController + "=" + inst
		defer dockertest.RemoveAll(instLabel)
		// A resync period longer than the spec: a container started behind
		// the controller's back is stopped again on the engine's event, not
		// by a periodic listing.
		cmd := exec.Command(managerBin, "--instance", inst, "--metrics-bind-address", "0", "--health-probe-bind-address", "0",
			"--finished-ttl", finishedTTL.String(), "--resync-period", "30m")
		cmd.Env = append(os.Environ(), "KUBECONFIG="+own.Kubeconfig)
		mgr, err := gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		defer func() { mgr.Kill(); Eventually(mgr).Should(gexec.Exit()) }()

		kubectlCmd := func(stdin string, args ...string) (string, error) {
			cmd := exec.Command("kubectl", append([]string{"--kubeconfig", own.Kubeconfig, "-n", "default"}, args...)...)
			cmd.Stdin = strings.NewReader(stdin)
			out, err := cmd.CombinedOutput()
			return strings.TrimSpace(string(out)), err
		}
		k := func(stdin string, args ...string) string {
			out, err := kubectlCmd(stdin, args...)
			ExpectWithOffset(1, err).NotTo(HaveOccurred(), "kubectl %s: %s", strings.Join(args, " "), out)
			return out
		}
		// get reads an object with kubectl get -o json.
		get := func(obj any, ref string) {
			out := k("", "get", ref, "-o", "json")
			ExpectWithOffset(1, json.Unmarshal([]byte(out), obj)).To(Succeed())
		}
		// gone is true once kubectl get says the object is NotFound; any
		// other failure of kubectl fails the spec.
		gone := func(ref string) bool {
			out, err := kubectlCmd("", "get", ref, "-o", "name")
			if err == nil {
				return false
			}
			Expect(out).To(ContainSubstring("NotFound"), "kubectl get %s", ref)
			return true
		}
		plugin := pluginBin()
		afe := func(args ...string) *exec.Cmd {
			return exec.Command(plugin, append([]string{"--kubeconfig", own.Kubeconfig, "-n", "default"}, args...)...)
		}
		createdRun := regexp.MustCompile(`run/(\S+) created`)
		running := func(name string) string {
			out, _ := exec.Command("docker", "inspect", "-f", "{{.State.Running}}", name).Output()
			return strings.TrimSpace(string(out))
		}
		phase := func(ref string) string { return k("", "get", ref, "-o", "jsonpath={.status.phase}") }

		By("a ticket past spec.lifecycle.activeDeadlineSeconds ends Finished, its Failed condition's reason DeadlineExceeded")
		Expect(k(`apiVersion: sandbox.afe.dev/v1alpha1
kind: Ticket
metadata: {name: overdue}
spec:
  lifecycle: {activeDeadlineSeconds: `+fmt.Sprint(deadline)+`}
  sandbox: {image: `+dockertest.TestImage+`}
`, "apply", "-f", "-")).To(ContainSubstring("ticket.sandbox.afe.dev/overdue created"))
		Eventually(func() string { return k("", "get", "sandbox", "-o", "name") }).Should(Equal("sandbox.sandbox.afe.dev/overdue"))
		k("", "wait", "--for=condition=Ready", "sandbox/overdue", "--timeout=60s")
		Expect(dockertest.Objects(instLabel)).NotTo(BeEmpty(), "the ticket's sandbox is on the engine")
		// A Run in flight at the deadline, with a TTL of its own that keeps
		// it past --finished-ttl to be read.
		Expect(k(`apiVersion: sandbox.afe.dev/v1alpha1
kind: Run
metadata: {name: overdue-forever}
spec:
  sandboxRef: {name: overdue}
  script: sleep 300
  ttlSecondsAfterFinished: 600
`, "apply", "-f", "-")).To(ContainSubstring("run.sandbox.afe.dev/overdue-forever created"))
		k("", "wait", "--for=jsonpath={.status.phase}=Running", "run/overdue-forever", "--timeout=60s")
		k("", "wait", "--for=jsonpath={.status.phase}=Finished", "ticket/overdue", "--timeout=120s")
		// Read at once: --finished-ttl deletes the ticket from finishedTime on.
		var tk afev1.Ticket
		get(&tk, "ticket/overdue")
		Expect(k("", "get", "ticket/overdue", "-o",
			`jsonpath={.spec.state} {.status.phase} {.status.conditions[?(@.type=="Failed")].status} {.status.conditions[?(@.type=="Failed")].reason} {.status.conditions[?(@.type=="CleanedUp")].status}`)).
			To(Equal("Active Finished True DeadlineExceeded True"), "the user's spec.state is left as it is")
		Eventually(func() string {
			return k("", "get", "events", "--field-selector", "involvedObject.kind=Ticket,involvedObject.name=overdue,reason=DeadlineExceeded", "-o", "name")
		}).ShouldNot(BeEmpty(), "a DeadlineExceeded Event of the ticket")
		Eventually(func() string { return phase("run/overdue-forever") }).Should(Equal(string(afev1.RunFailed)))
		Expect(k("", "get", "run/overdue-forever", "-o", `jsonpath={.status.conditions[?(@.type=="Completed")].reason}`)).
			To(Equal(afev1.TicketFinishedReason))
		Eventually(func() bool { return gone("sandbox/overdue") }).Should(BeTrue(), "the ticket's sandbox is deleted")
		Eventually(func() ([]string, error) { return dockertest.Objects(instLabel) }).Should(BeEmpty(),
			"nothing of the instance is left on the engine")

		By("--finished-ttl deletes the finished ticket, not before its TTL")
		Expect(tk.Status.FinishedTime).NotTo(BeNil())
		Expect(tk.Status.FinishedTime.Sub(tk.CreationTimestamp.Time)).To(BeNumerically(">=", deadline*time.Second), "not before the deadline")
		Eventually(func() bool { return gone("ticket/overdue") }, 120*time.Second, 250*time.Millisecond).Should(BeTrue())
		Expect(time.Since(tk.Status.FinishedTime.Time)).To(BeNumerically(">=", finishedTTL), "not before --finished-ttl")
		Expect(phase("run/overdue-forever")).To(Equal(string(afev1.RunFailed)), "a Run's own ttlSecondsAfterFinished keeps it past --finished-ttl")

		Expect(k(`apiVersion: sandbox.afe.dev/v1alpha1
kind: Sandbox
metadata: {name: dozer}
spec:
  image: `+dockertest.TestImage+`
  lifecycle: {idleTimeoutSeconds: `+fmt.Sprint(idle)+`}
`, "apply", "-f", "-")).To(ContainSubstring("sandbox.sandbox.afe.dev/dozer created"))
		defer func() { k("", "delete", "sandbox/dozer", "--wait=true", "--timeout=60s") }()
		k("", "wait", "--for=condition=Ready", "sandbox/dozer", "--timeout=60s")
		container := "afe-default.dozer"

		By("a Run three times longer than the idle timeout: the sandbox is not suspended under it")
		long, err := gexec.Start(afe("run", "dozer", "--", "sh", "-c", fmt.Sprintf("sleep %d; echo slept", 3*idle)), GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		Eventually(long.Err, 60*time.Second).Should(gbytes.Say(`run/\S+ created`))
		longRun := "run/" + createdRun.FindStringSubmatch(string(long.Err.Contents()))[1]
		k("", "wait", "--for=jsonpath={.status.phase}=Running", longRun, "--timeout=60s")
		started, err := dockertest.Inspect(container)
		Expect(err).NotTo(HaveOccurred())
		Consistently(func() string { return phase("sandbox/dozer") + " " + running(container) },
			time.Duration(2*idle)*time.Second, 500*time.Millisecond).Should(Equal("Ready true"))
		Eventually(long, 60*time.Second).Should(gexec.Exit(0))
		Expect(string(long.Out.Contents())).To(Equal("slept\n"))
		var run afev1.Run
		get(&run, longRun)
		Expect(run.Status.Phase).To(Equal(afev1.RunCompleted))
		Expect(run.Status.Attempts).To(Equal(int32(1)), "executed once: never cut short by a suspension")
		Expect(run.Status.ContainerID).To(Equal(started.ID))
		after, err := dockertest.Inspect(container)
		Expect(err).NotTo(HaveOccurred())
		Expect(after.ID).To(Equal(started.ID))
		Expect(after.State.Running).To(BeTrue())
		Expect(after.State.Pid).To(Equal(started.State.Pid), "the container was not stopped and started again under the Run")

		By("suspended once idle for the timeout after the Run ended")
		Eventually(func() string { return phase("sandbox/dozer") }, 60*time.Second, 250*time.Millisecond).Should(Equal(string(afev1.SandboxSuspended)))
		var sbx afev1.Sandbox
		get(&sbx, "sandbox/dozer")
		Expect(sbx.Status.SuspendedTime).NotTo(BeNil())
		GinkgoWriter.Printf("idle suspension %s after the Run ended (idle timeout %ds)\n",
			sbx.Status.SuspendedTime.Sub(run.Status.CompletionTime.Time), idle)
		Expect(sbx.Status.SuspendedTime.Sub(run.Status.CompletionTime.Time)).To(BeNumerically(">=", idle*time.Second),
			"not before the idle timeout counted from the Run's end")
		ready := meta.FindStatusCondition(sbx.Status.Conditions, afev1.SandboxReadyCondition)
		Expect(ready).NotTo(BeNil())
		Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		Expect(ready.Reason).To(Equal(afev1.SuspendedReason))
		Expect(running(container)).To(Equal("false"))

		By("--finished-ttl deletes the Run of kubectl afe run, which has no TTL of its own")
		Expect(run.Spec.TTLSecondsAfterFinished).To(BeNil())
		Eventually(func() bool { return gone(longRun) }, 120*time.Second, 250*time.Millisecond).Should(BeTrue())
		Expect(time.Since(run.Status.CompletionTime.Time)).To(BeNumerically(">=", finishedTTL), "not before --finished-ttl")

		// The deletion of a Run has its sandbox looked at: once it is done,
		// only the engine's start event can have the container stopped.
		By("docker start behind the controller's back: stopped again, the same container, no recreation")
		Expect(exec.Command("docker", "start", container).Run()).To(Succeed())
		Eventually(func() string { return running(container) }, 60*time.Second, 250*time.Millisecond).Should(Equal("false"))
		Consistently(func() string { return phase("sandbox/dozer") + " " + running(container) },
			4*time.Second, 500*time.Millisecond).Should(Equal("Suspended false"))
		stopped, err := dockertest.Inspect(container)
		Expect(err).NotTo(HaveOccurred())
		Expect(stopped.ID).To(Equal(started.ID), "not recreated")
		Expect(k("", "get", "sandbox/dozer", "-o", "jsonpath={.status.recreations}")).To(BeEmpty(), "not a loss")
		Expect(k("", "get", "sandbox/dozer", "-o", "jsonpath={.status.containerID}")).To(Equal(started.ID))

		By("side by side, a Run's own longer ttlSecondsAfterFinished keeps it past --finished-ttl, then deletes it")
		// On the suspended sandbox: the Run resumes it.
		short, err := gexec.Start(afe("run", "dozer", "--", "echo", "short"), GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		Eventually(short, 120*time.Second).Should(gexec.Exit(0))
		Expect(string(short.Out.Contents())).To(Equal("short\n"))
		shortRun := "run/" + createdRun.FindStringSubmatch(string(short.Err.Contents()))[1]
		Expect(k(`apiVersion: sandbox.afe.dev/v1alpha1
kind: Run
metadata: {name: kept}
spec:
  sandboxRef: {name: dozer}
  command: ["true"]
  ttlSecondsAfterFinished: `+fmt.Sprint(keptTTL)+`
`, "apply", "-f", "-")).To(ContainSubstring("run.sandbox.afe.dev/kept created"))
		var shortDone afev1.Run
		get(&shortDone, shortRun)
		Expect(shortDone.Status.Phase).To(Equal(afev1.RunCompleted))
		Expect(shortDone.Spec.TTLSecondsAfterFinished).To(BeNil(), "no TTL of its own")
		k("", "wait", "--for=jsonpath={.status.phase}=Completed", "run/kept", "--timeout=60s")
		var kept afev1.Run
		get(&kept, "run/kept")
		Eventually(func() bool { return gone(shortRun) }, 120*time.Second, 250*time.Millisecond).Should(BeTrue())
		Expect(time.Since(shortDone.Status.CompletionTime.Time)).To(BeNumerically(">=", finishedTTL), "not before --finished-ttl")
		Expect(gone("run/kept")).To(BeFalse(), "kept past --finished-ttl by its own ttlSecondsAfterFinished")
		Eventually(func() bool { return gone("run/kept") }, 120*time.Second, 250*time.Millisecond).Should(BeTrue(), "deleted at its own TTL")
		Expect(time.Since(kept.Status.CompletionTime.Time)).To(BeNumerically(">=", keptTTL*time.Second), "not before its own TTL")
		GinkgoWriter.Printf("spec took %s\n", time.Since(began))
	})
})
