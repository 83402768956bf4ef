package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
	"github.com/onsi/gomega/gexec"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/test/dockertest"
)

// A control plane and a manager of the test's own, so that the manager can
// be killed and started again.
var _ = Describe("Sandbox suspension through kubectl and the plugin", func() {
	It("suspends and resumes with kubectl afe, suspends when idle, and keeps both across a manager restart", func() {
		own := ownControlPlane()
		defer func() { Expect(own.Stop()).To(Succeed()) }()
		inst := fmt.Sprintf("e2e-lifecycle-%d", os.Getpid())
		defer dockertest.RemoveAll(afev1.LabelController + "=" + inst)
		var mgr *gexec.Session
		start := func() {
			cmd := exec.Command(managerBin, "--instance", inst, "--metrics-bind-address", "0", "--health-probe-bind-address", "0")
			cmd.Env = append(os.Environ(), "KUBECONFIG="+own.Kubeconfig)
			var err error
			mgr, err = gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
			Expect(err).NotTo(HaveOccurred())
		}
		start()
		defer func() { mgr.Kill(); Eventually(mgr).Should(gexec.Exit()) }()
		k := func(stdin string, args ...string) string {
			cmd := exec.Command("kubectl", append([]string{"--kubeconfig", own.Kubeconfig, "-n", "default"}, args...)...)
			cmd.Stdin = strings.NewReader(stdin)
			out, err := cmd.CombinedOutput()
			ExpectWithOffset(1, err).NotTo(HaveOccurred(), "kubectl %s: %s", strings.Join(args, " "), out)
			return strings.TrimSpace(string(out))
		}
		plugin := pluginBin()
		afe := func(args ...string) string {
			cmd := exec.Command(plugin, append([]string{"--kubeconfig", own.Kubeconfig, "-n", "default"}, args...)...)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			ExpectWithOffset(1, err).NotTo(HaveOccurred(), "kubectl afe %s: %s%s", strings.Join(args, " "), out, stderr.String())
			return strings.TrimSpace(string(out))
		}
		running := func(name string) string {
			out, _ := exec.Command("docker", "inspect", "-f", "{{.State.Running}}", name).Output()
			return strings.TrimSpace(string(out))
		}
		phase := func(name string) string { return k("", "get", "sandbox/"+name, "-o", "jsonpath={.status.phase}") }

		Expect(k(`apiVersion: sandbox.afe.dev/v1alpha1
kind: Sandbox
metadata: {name: napper}
spec:
  image: `+dockertest.TestImage+`
  lifecycle: {idleTimeoutSeconds: 8}
`, "apply", "-f", "-")).To(ContainSubstring("sandbox.sandbox.afe.dev/napper created"))
		defer func() { k("", "delete", "sandbox/napper", "--wait=true", "--timeout=60s") }()
		k("", "wait", "--for=condition=Ready", "sandbox/napper", "--timeout=60s")
		container := "afe-default.napper"

		By("kubectl afe suspend: the container stops, kubectl get shows Suspended")
		Expect(afe("suspend", "napper")).To(Equal("sandbox/napper suspended"))
		k("", "wait", "--for=jsonpath={.status.phase}=Suspended", "sandbox/napper", "--timeout=30s")
		Expect(k("", "get", "sbx", "napper")).To(MatchRegexp(`napper\s.*\sSuspended\s`))
		Expect(running(container)).To(Equal("false"))

		By("a restart of the manager keeps it suspended")
		mgr.Kill()
		Eventually(mgr).Should(gexec.Exit())
		start()
		Consistently(func() string { return running(container) }, 4*time.Second, 250*time.Millisecond).Should(Equal("false"))
		Expect(phase("napper")).To(Equal("Suspended"))

		By("kubectl afe resume: the same container runs again")
		Expect(afe("resume", "napper")).To(Equal("sandbox/napper resumed"))
		k("", "wait", "--for=condition=Ready", "sandbox/napper", "--timeout=30s")
		Expect(running(container)).To(Equal("true"))
		Expect(k("", "get", "sandbox/napper", "-o", "jsonpath={.status.recreations}")).To(BeEmpty(), "resumed, not recreated")

		By("an idle timer that counts from the last activity recorded, not from a restart")
		Expect(afe("run", "napper", "--", "sh", "-c", "echo woke > /workspace/mark; cat /workspace/mark")).To(Equal("woke"))
		// Then a command of the user's (kubectl afe shell is one), which
		// only the engine's exec events show and only the status records.
		time.Sleep(3 * time.Second)
		execStarted := time.Now()
		Expect(exec.Command("docker", "exec", container, "true").Run()).To(Succeed())
		runEnded := time.Now()
		// The status records the exec (rounded up to the second) before
		// the manager is killed; the Run's activity, 3 s earlier, is not
		// that late.
		Eventually(func() (time.Time, error) {
			return time.Parse(time.RFC3339, k("", "get", "sandbox/napper", "-o", "jsonpath={.status.lastActivityTime}"))
		}, 30*time.Second, 200*time.Millisecond).Should(BeTemporally(">=", execStarted.Truncate(time.Second)),
			"status.lastActivityTime records the docker exec")
		// The restart comes 6 s into the idle timeout of 8, so that a timer
		// started again at it (8 s on) is told apart from the recorded one
		// (2 to 3 s on, the activity rounded up to the second) with room
		// for the restart and the stop (7.35 s at a restart 3 s in, once).
		time.Sleep(time.Until(runEnded.Add(6 * time.Second)))
		mgr.Kill()
		Eventually(mgr).Should(gexec.Exit())
		start()
		restarted := time.Now()
		Eventually(func() string { return phase("napper") }, 30*time.Second, 200*time.Millisecond).Should(Equal("Suspended"))
		suspended := time.Now()
		GinkgoWriter.Printf("idle suspension %s after the last exec ended, %s after the restart (idle timeout 8s)\n",
			suspended.Sub(runEnded), suspended.Sub(restarted))
		Expect(suspended.Sub(runEnded)).To(BeNumerically(">=", 7*time.Second), "not before the idle timeout (less kubectl's own time)")
		Expect(suspended.Sub(restarted)).To(BeNumerically("<", 6500*time.Millisecond), "the timer did not start again at the restart")
		Expect(running(container)).To(Equal("false"))

		By("a restart after the idle suspension (spec.suspend false) keeps it suspended")
		mgr.Kill()
		Eventually(mgr).Should(gexec.Exit())
		start()
		// Looked at only once the new manager's Sandbox workers run.
		Eventually(mgr.Err, 60*time.Second).Should(gbytes.Say(`Starting workers.*"controller": ?"sandbox"`))
		Consistently(func() string { return running(container) }, 4*time.Second, 250*time.Millisecond).Should(Equal("false"))
		Expect(k("", "get", "sandbox/napper", "-o",
			`jsonpath={.spec.suspend} {.status.phase} {.status.conditions[?(@.type=="Ready")].reason} {.status.recreations}`)).
			To(Equal("false Suspended Suspended"), "idle-suspended (spec.suspend false since the resume), not lost (no recreations)")

		By("kubectl afe run on the idle-suspended sandbox: it is resumed for the Run, workspace kept")
		Expect(afe("run", "napper", "--", "cat", "/workspace/mark")).To(Equal("woke"))

		By("kubectl afe resume of an idle-suspended sandbox (spec.suspend already false)")
		Eventually(func() string { return phase("napper") }, 30*time.Second, 200*time.Millisecond).Should(Equal("Suspended"))
		Expect(afe("resume", "napper")).To(Equal("sandbox/napper resumed"))
		k("", "wait", "--for=condition=Ready", "sandbox/napper", "--timeout=30s")
		Expect(running(container)).To(Equal("true"))
	})
})
