package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/test/dockertest"
	"afe.dev/sandbox/test/testenv"
)

// The controller image runs as a container against a control plane of its
// own (so that it is the only controller there) and the local engine.
var _ = Describe("The controller image", func() {
	It("holds a per-node placeholder's place with /manager pause, as a kubelet would run it, until stopped", func() {
		image := os.Getenv("AFE_CONTROLLER_IMAGE")
		if image == "" {
			image = "afe/controller:dev"
		}
		if err := exec.Command("docker", "image", "inspect", image).Run(); err != nil {
			Fail(image + " is missing: run make docker-build")
		}
		inst := fmt.Sprintf("e2e-pause-%d", os.Getpid())
		// The placeholder Pod's security context: non-root, read-only, no
		// capability, no network.
		out, err := exec.Command("docker", "run", "-d", "--name", inst, "--label", afev1.LabelController+"="+inst,
			"--user", "65532:65532", "--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--network", "none",
			"--entrypoint", "/manager", image, "pause").CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
		defer dockertest.RemoveAll(afev1.LabelController + "=" + inst)
		// Until it says so, its signal handler may not be in place yet: the
		// engine reports a container running before its program got that
		// far, and a loaded machine may take seconds to read a binary in.
		Eventually(func() string {
			logs, _ := exec.Command("docker", "logs", inst).CombinedOutput()
			return string(logs)
		}, "2m", "100ms").Should(ContainSubstring("holding this ticket's place until stopped"))
		Consistently(func() string {
			s, _ := exec.Command("docker", "inspect", "-f", "{{.State.Status}}", inst).Output()
			return strings.TrimSpace(string(s))
		}, "2s").Should(Equal("running"))
		Expect(exec.Command("docker", "stop", "-t", "10", inst).Run()).To(Succeed())
		code, err := exec.Command("docker", "inspect", "-f", "{{.State.ExitCode}}", inst).Output()
		Expect(err).NotTo(HaveOccurred())
		Expect(strings.TrimSpace(string(code))).To(Equal("0"), "pause ends at once, and cleanly, on SIGTERM")
	})

	It("reconciles the sample sandbox from a container", func() {
		image := os.Getenv("AFE_CONTROLLER_IMAGE")
		if image == "" {
			image = "afe/controller:dev"
		}
		if err := exec.Command("docker", "image", "inspect", image).Run(); err != nil {
			if testenv.DockerRequired() {
				Fail(image + " is missing: run make docker-build")
			}
			Skip(image + " is missing: run make docker-build")
		}
		own := ownControlPlane()
		defer func() { Expect(own.Stop()).To(Succeed()) }()
		Expect(os.Chmod(own.Kubeconfig, 0o644)).To(Succeed())

		inst := fmt.Sprintf("e2e-image-%d", os.Getpid())
		name := inst + "-manager"
		socketGID := strings.TrimSpace(string(must(exec.Command("stat", "-c", "%g", "/var/run/docker.sock").Output())))
		out, err := exec.Command("docker", "run", "-d", "--name", name,
			"--label", afev1.LabelController+"="+inst,
			"--network", "host", // the local API server listens on loopback
			"--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
			"--group-add", socketGID,
			"-v", "/var/run/docker.sock:/var/run/docker.sock",
			"-v", own.Kubeconfig+":/etc/afe/kubeconfig:ro",
			"-e", "KUBECONFIG=/etc/afe/kubeconfig",
			image, "--instance", inst, "--metrics-bind-address", "0", "--health-probe-bind-address", "0",
			// As config/manager: a manager without a capability installs
			// the conntrack bound through a helper container.
			"--sandbox-conn-image", dockertest.NftImage,
		).CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
		defer dockertest.RemoveAll(afev1.LabelController + "=" + inst)
		// The manager goes before its objects: it would make them again.
		defer func() { _ = exec.Command("docker", "rm", "-f", name).Run() }()
		defer func() {
			logs, _ := exec.Command("docker", "logs", name).CombinedOutput()
			GinkgoWriter.Printf("controller container logs:\n%s\n", logs)
		}()

		k := func(args ...string) {
			out, err := exec.Command("kubectl", append([]string{"--kubeconfig", own.Kubeconfig, "-n", "default"}, args...)...).CombinedOutput()
			ExpectWithOffset(1, err).NotTo(HaveOccurred(), string(out))
		}
		k("apply", "-f", filepath.Join(root, "config", "samples", "sandbox_v1alpha1_sandbox.yaml"))
		t0 := time.Now()
		k("wait", "--for=condition=Ready", "sandbox/sample", "--timeout=90s")
		GinkgoWriter.Printf("controller image: sample Ready after %s\n", time.Since(t0))
		c, err := dockertest.Inspect("afe-default.sample")
		Expect(err).NotTo(HaveOccurred())
		Expect(c.Config.Labels).To(HaveKeyWithValue(afev1.LabelController, inst))
		Expect(c.HostConfig.CapDrop).To(Equal([]string{"ALL"}))
		k("delete", "sandbox/sample", "--timeout=60s")
		Expect(dockertest.Objects(afev1.LabelSandbox + "=sample," + afev1.LabelController + "=" + inst)).To(BeEmpty())

		By("bounding a sandbox's network in the host's conntrack table through the helper")
		apply := exec.Command("kubectl", "--kubeconfig", own.Kubeconfig, "-n", "default", "apply", "-f", "-")
		apply.Stdin = strings.NewReader(`{"apiVersion": "sandbox.afe.dev/v1alpha1", "kind": "Sandbox", "metadata": {"name": "bounded"},
			"spec": {"image": "afe/busybox:dev", "egress": ["allowed.test"]}}`)
		Expect(apply.CombinedOutput()).Error().NotTo(HaveOccurred())
		if err := exec.Command("kubectl", "--kubeconfig", own.Kubeconfig, "-n", "default", "wait", "--for=condition=Ready", "sandbox/bounded", "--timeout=90s").Run(); err != nil {
			status, _ := exec.Command("kubectl", "--kubeconfig", own.Kubeconfig, "-n", "default", "get", "sandbox/bounded", "-o", "jsonpath={.status}").CombinedOutput()
			Fail(fmt.Sprintf("sandbox/bounded is not Ready: %v: %s", err, status))
		}
		helper, err := dockertest.Inspect("afe-" + inst + "-conntrack")
		Expect(err).NotTo(HaveOccurred())
		Expect(helper.Config.Labels).To(HaveKeyWithValue(afev1.LabelRole, afev1.RoleConnLimit))
		Expect(helper.HostConfig.NetworkMode).To(Equal("host"))
		Expect(helper.HostConfig.CapAdd).To(ConsistOf(BeElementOf("NET_ADMIN", "CAP_NET_ADMIN")), "engines from 23 on report the prefix")
		subnet := strings.TrimSpace(string(must(exec.Command("docker", "network", "inspect", "-f", "{{(index .IPAM.Config 0).Subnet}}", "afe-default.bounded_net").Output())))
		Expect(string(must(exec.Command("nft", "list", "set", "ip", "afe-"+inst, "nets").CombinedOutput()))).To(ContainSubstring(subnet))
		k("delete", "sandbox/bounded", "--timeout=60s")
	})
})

func must[T any](v T, err error) T {
	Expect(err).NotTo(HaveOccurred())
	return v
}
