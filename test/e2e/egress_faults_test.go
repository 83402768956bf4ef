package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/test/dockertest"
)

// The egress conditions an operator's mistake leads to, reached for real: a
// --egress-network the engine does not have, and a --proxy-image that runs
// but is no proxy. Each is a condition that names the fix, and the sandbox
// becomes Ready once the manager runs with the right flags.
var _ = Describe("Egress faults of the operator's making", func() {
	It("says EgressNetworkMissing, then ProxyNotAnswering, then Ready", func() {
		own := ownControlPlane()
		defer func() { Expect(own.Stop()).To(Succeed()) }()
		inst := fmt.Sprintf("e2e-egress-faults-%d", os.Getpid())
		label := afev1.LabelController + "=" + inst
		defer dockertest.RemoveAll(label)
		docker := func(args ...string) string {
			out, err := exec.Command("docker", args...).CombinedOutput()
			ExpectWithOffset(1, err).NotTo(HaveOccurred(), "docker %s: %s", strings.Join(args, " "), out)
			return strings.TrimSpace(string(out))
		}
		egress := "afe-e2e-egress-" + inst
		docker("network", "create", "--label", label, egress)
		notProxy := "afe/not-a-proxy:" + inst
		build := exec.Command("docker", "build", "-q", "--label", label, "-t", notProxy, "-")
		build.Env = append(os.Environ(), "DOCKER_BUILDKIT=0")
		build.Stdin = strings.NewReader("FROM " + dockertest.TestImage + "\nCMD [\"sleep\", \"3600\"]\n")
		out, err := build.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
		defer func() { _ = exec.Command("docker", "rmi", "-f", notProxy).Run() }()

		var mgr *gexec.Session
		start := func(args ...string) {
			cmd := exec.Command(managerBin, append([]string{"--instance", inst, "--metrics-bind-address", "0",
				"--health-probe-bind-address", "0"}, args...)...)
			cmd.Env = append(os.Environ(), "KUBECONFIG="+own.Kubeconfig)
			mgr, err = gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
			Expect(err).NotTo(HaveOccurred())
		}
		stop := func() {
			if mgr == nil {
				return
			}
			mgr.Signal(syscall.SIGTERM)
			Eventually(mgr, 20*time.Second).Should(gexec.Exit())
			mgr = nil
		}
		// Whichever manager runs when the spec ends, however it ends, stops
		// before the objects are removed (defers run last in, first out).
		defer stop()
		egressReady := func() (string, string) {
			out, _ := exec.Command("kubectl", "--kubeconfig", own.Kubeconfig, "-n", "default", "get", "sandbox/out",
				"-o", `jsonpath={.status.conditions[?(@.type=="EgressReady")].reason}|{.status.conditions[?(@.type=="EgressReady")].message}`).CombinedOutput()
			reason, message, _ := strings.Cut(strings.TrimSpace(string(out)), "|")
			return reason, message
		}
		reason := func() string { r, _ := egressReady(); return r }

		By("an --egress-network the engine does not have")
		start("--egress-network", egress+"-missing")
		apply := exec.Command("kubectl", "--kubeconfig", own.Kubeconfig, "-n", "default", "apply", "-f", "-")
		apply.Stdin = strings.NewReader("apiVersion: sandbox.afe.dev/v1alpha1\nkind: Sandbox\nmetadata: {name: out}\nspec: {image: afe/busybox:dev, egress: [allowed.test]}\n")
		out, err = apply.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
		Eventually(reason).Should(Equal(afev1.EgressNetworkMissingReason))
		_, message := egressReady()
		Expect(message).To(ContainSubstring("--egress-network " + egress + "-missing"))
		stop()

		By("a --proxy-image that runs but is no proxy")
		start("--egress-network", egress, "--proxy-image", notProxy)
		// It has no user "proxy": the engine cannot start it.
		Eventually(reason, "90s").Should(Equal(afev1.ProxyNotAnsweringReason))
		_, message = egressReady()
		Expect(message).To(ContainSubstring("check the controller's --proxy-image"))
		stop()

		By("the right flags: Ready")
		start("--egress-network", egress)
		Eventually(reason, "90s").Should(Equal(afev1.ReadyReason))
		out, err = exec.Command("kubectl", "--kubeconfig", own.Kubeconfig, "-n", "default", "delete", "sandbox/out", "--timeout=60s").CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
	})
})
