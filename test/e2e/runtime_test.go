package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/test/dockertest"
)

// A Sandbox under gVisor through kubectl, on a control plane and a manager
// of the spec's own whose --runtimes allows runsc.
var _ = Describe("A sandbox under gVisor (runsc) through kubectl", func() {
	It("becomes Ready under runsc, shows it in -o wide, runs a Run, and refuses a runtime not on --runtimes", func() {
		engine, _, err := dockertest.Require()
		Expect(err).NotTo(HaveOccurred())
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err = engine.Runtime(ctx, "runsc")
		Expect(err).NotTo(HaveOccurred(), "the spec runs a sandbox under runsc: the engine must have it (make runsc)")

		own := newOwnCluster()
		inst := fmt.Sprintf("e2e-runtime-%d", os.Getpid())
		defer dockertest.RemoveAll(afev1.LabelController + "=" + inst)
		mgr := own.startManager("", nil, "--instance", inst, "--runtimes", "runc,runsc")
		defer func() { stopManager(mgr) }()

		Expect(own.kubectl(fmt.Sprintf(`apiVersion: sandbox.afe.dev/v1alpha1
kind: Sandbox
metadata:
  name: gvisor
spec:
  image: %s
  runtime: runsc
---
apiVersion: sandbox.afe.dev/v1alpha1
kind: Run
metadata:
  name: uname
spec:
  sandboxRef:
    name: gvisor
  script: dmesg | grep -q 'Starting gVisor' && uname -r
`, dockertest.TestImage), "apply", "-f", "-")).To(ContainSubstring("sandbox.sandbox.afe.dev/gvisor created"))
		own.kubectl("", "wait", "--for=condition=Ready", "sandbox/gvisor", "--timeout=90s")

		By("showing the runtime in kubectl get -o wide")
		lines := strings.Split(own.kubectl("", "get", "sandboxes", "-o", "wide"), "\n")
		Expect(lines).To(HaveLen(2))
		// Columns are aligned and empty ones blank: the value starts under
		// its header.
		col := strings.Index(lines[0], "RUNTIME")
		Expect(col).To(BeNumerically(">", 0), lines[0])
		Expect(len(lines[1])).To(BeNumerically(">", col), lines[1])
		Expect(strings.Fields(lines[1][col:])[0]).To(Equal("runsc"), "%s\n%s", lines[0], lines[1])
		c, err := dockertest.Inspect("afe-default.gvisor")
		Expect(err).NotTo(HaveOccurred())
		Expect(c.HostConfig.Runtime).To(Equal("runsc"))

		By("running a Run on gVisor's kernel")
		own.kubectl("", "wait", "run/uname", "--timeout=90s", "--for=jsonpath={.status.phase}="+string(afev1.RunCompleted))
		Expect(own.get("run/uname", "{.status.ok} {.status.output}")()).To(Equal("true 4.19.0-gvisor"), "the output is trimmed")

		By("refusing a runtime not on --runtimes, creating nothing")
		Expect(own.kubectl(fmt.Sprintf(`apiVersion: sandbox.afe.dev/v1alpha1
kind: Sandbox
metadata:
  name: other
spec:
  image: %s
  runtime: kata
`, dockertest.TestImage), "apply", "-f", "-")).To(ContainSubstring("other created"))
		Eventually(own.reason("sandbox/other", afev1.ContainerReadyCondition)).Should(Equal(afev1.RuntimeNotAllowedReason))
		_, err = dockertest.Inspect("afe-default.other")
		Expect(err).To(HaveOccurred(), "a container was made")
		made, err := dockertest.Objects(afev1.LabelController + "=" + inst + "," + afev1.LabelNamespace + "=default," + afev1.LabelSandbox + "=other")
		Expect(err).NotTo(HaveOccurred())
		Expect(made).To(BeEmpty(), "the engine has objects of the refused sandbox")
		own.kubectl("", "delete", "sandbox/other", "sandbox/gvisor", "--timeout=90s")
	})
})
