package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"strings"

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
		own := newOwnCluster()
		inst := fmt.Sprintf("e2e-egress-faults-%d", os.Getpid())
		label := afev1.LabelController + "=" + inst
		defer dockertest.RemoveAll(label)
		egress := "afe-e2e-egress-" + inst
		mustDocker("network", "create", "--label", label, egress)
		notProxy := "afe/not-a-proxy:" + inst
		build := exec.Command("docker", "build", "-q", "--label", label, "-t", notProxy, "-")
		build.Env = append(os.Environ(), "DOCKER_BUILDKIT=0")
		build.Stdin = strings.NewReader("FROM " + dockertest.TestImage + "\nCMD [\"sleep\", \"3600\"]\n")
		out, err := build.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
		defer func() { _ = exec.Command("docker", "rmi", "-f", notProxy).Run() }()

		var mgr *gexec.Session
		start := func(args ...string) {
			mgr = own.startManager("", nil, append([]string{"--instance", inst}, args...)...)
		}
		stop := func() { stopManager(mgr); mgr = nil }
		// Whichever manager runs when the spec ends, however it ends, stops
		// before the objects are removed (defers run last in, first out).
		defer stop()
		reason := own.reason("sandbox/out", afev1.EgressReadyCondition)
		condition := own.condition("sandbox/out", afev1.EgressReadyCondition)

		By("an --egress-network the engine does not have")
		start("--egress-network", egress+"-missing")
		own.kubectl("apiVersion: sandbox.afe.dev/v1alpha1\nkind: Sandbox\nmetadata: {name: out}\nspec: {image: afe/busybox:dev, egress: [allowed.test]}\n", "apply", "-f", "-")
		Eventually(condition).Should(And(HavePrefix(afev1.EgressNetworkMissingReason+": "),
			ContainSubstring("--egress-network "+egress+"-missing")))
		stop()

		By("a --proxy-image that runs but is no proxy")
		start("--egress-network", egress, "--proxy-image", notProxy)
		// It has no user "proxy": the engine cannot start it.
		Eventually(condition, "90s").Should(And(HavePrefix(afev1.ProxyNotAnsweringReason+": "),
			ContainSubstring("check the controller's --proxy-image")))
		stop()

		By("the right flags: Ready")
		start("--egress-network", egress)
		Eventually(reason, "90s").Should(Equal(afev1.ReadyReason))
		own.kubectl("", "delete", "sandbox/out", "--timeout=60s")
	})

	It("says AddressPoolExhausted when --egress-subnets is full, and Ready once a block is free", func() {
		own := newOwnCluster()
		inst := fmt.Sprintf("e2e-egress-full-%d", os.Getpid())
		label := afev1.LabelController + "=" + inst
		defer dockertest.RemoveAll(label)
		egress := "afe-e2e-egress-" + inst
		out, err := exec.Command("docker", "network", "create", "--label", label, egress).CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
		// Two /29 blocks, for three sandboxes with egress.
		defer stopManager(own.startManager("", nil, "--instance", inst, "--egress-network", egress, "--egress-subnets", "10.213.7.0/28"))
		for _, name := range []string{"one", "two", "three"} {
			own.kubectl(fmt.Sprintf("apiVersion: sandbox.afe.dev/v1alpha1\nkind: Sandbox\nmetadata: {name: %s}\nspec: {image: afe/busybox:dev, egress: [allowed.test]}\n", name), "apply", "-f", "-")
			if name != "three" {
				own.kubectl("", "wait", "--for=condition=Ready", "sandbox/"+name, "--timeout=90s")
			}
		}
		Eventually(own.condition("sandbox/three", afev1.EgressReadyCondition), "60s").Should(And(
			HavePrefix(afev1.AddressPoolExhaustedReason+": "), ContainSubstring("--egress-subnets (10.213.7.0/28: 2 blocks)")))
		three, err := dockertest.Objects(label + "," + afev1.LabelSandbox + "=three")
		Expect(err).NotTo(HaveOccurred())
		Expect(three).NotTo(ContainElement(HavePrefix("network/")), "no network is made while no block is free")
		Expect(three).NotTo(ContainElement(HavePrefix("container/")))

		By("freeing a block")
		own.kubectl("", "delete", "sandbox/one", "--timeout=60s")
		own.kubectl("", "wait", "--for=condition=Ready", "sandbox/three", "--timeout=120s")
		own.kubectl("", "delete", "sandbox/two", "sandbox/three", "--timeout=60s")
	})
})
