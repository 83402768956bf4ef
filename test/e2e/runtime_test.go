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

// e2eRuntimes is the manager's --runtimes here: gVisor's runsc is always on
// it, so the e2e covers a sandbox under runsc through kubectl.
const e2eRuntimes = "runc,runsc"

var _ = Describe("A sandbox under gVisor (runsc) through kubectl", func() {
	It("becomes Ready under runsc, shows it in -o wide, runs a Run, and refuses a runtime not on --runtimes", func() {
		engine, _, err := dockertest.Require()
		Expect(err).NotTo(HaveOccurred())
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err = engine.Runtime(ctx, "runsc")
		Expect(err).NotTo(HaveOccurred(), "the manager is started with --runtimes %s: the engine must have runsc (make runsc)", e2eRuntimes)

		ns := fmt.Sprintf("e2e-rt-%d", os.Getpid())
		mustKubectl("create", "namespace", ns)
		Expect(mustKubectlStdin(fmt.Sprintf(`apiVersion: sandbox.afe.dev/v1alpha1
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
`, dockertest.TestImage), "apply", "-n", ns, "-f", "-")).To(ContainSubstring("sandbox.sandbox.afe.dev/gvisor created"))
		mustKubectl("wait", "-n", ns, "--for=condition=Ready", "sandbox/gvisor", "--timeout=90s")

		By("showing the runtime in kubectl get -o wide")
		lines := strings.Split(mustKubectl("get", "sandboxes", "-n", ns, "-o", "wide"), "\n")
		Expect(lines).To(HaveLen(2))
		// Columns are aligned and empty ones blank: the value starts under
		// its header.
		col := strings.Index(lines[0], "RUNTIME")
		Expect(col).To(BeNumerically(">", 0), lines[0])
		Expect(len(lines[1])).To(BeNumerically(">", col), lines[1])
		Expect(strings.Fields(lines[1][col:])[0]).To(Equal("runsc"), "%s\n%s", lines[0], lines[1])
		c, err := dockertest.Inspect("afe-" + ns + ".gvisor")
		Expect(err).NotTo(HaveOccurred())
		Expect(c.HostConfig.Runtime).To(Equal("runsc"))

		By("running a Run on gVisor's kernel")
		mustKubectl("wait", "-n", ns, "run/uname", "--timeout=90s", "--for=jsonpath={.status.phase}="+string(afev1.RunCompleted))
		Expect(mustKubectl("get", "run", "uname", "-n", ns, "-o", "jsonpath={.status.ok} {.status.output}")).To(Equal("true 4.4.0"), "mustKubectl trims the output")

		By("refusing a runtime not on --runtimes, creating nothing")
		Expect(mustKubectlStdin(fmt.Sprintf(`apiVersion: sandbox.afe.dev/v1alpha1
kind: Sandbox
metadata:
  name: other
spec:
  image: %s
  runtime: kata
`, dockertest.TestImage), "apply", "-n", ns, "-f", "-")).To(ContainSubstring("other created"))
		mustKubectl("wait", "-n", ns, "sandbox/other", "--timeout=60s",
			`--for=jsonpath={.status.conditions[?(@.type=="`+afev1.ContainerReadyCondition+`")].reason}=`+afev1.RuntimeNotAllowedReason)
		_, err = dockertest.Inspect("afe-" + ns + ".other")
		Expect(err).To(HaveOccurred(), "a container was made")
		made, err := dockertest.Objects(afev1.LabelController + "=" + instance + "," + afev1.LabelNamespace + "=" + ns + "," + afev1.LabelSandbox + "=other")
		Expect(err).NotTo(HaveOccurred())
		Expect(made).To(BeEmpty(), "the engine has objects of the refused sandbox")
		mustKubectl("delete", "-n", ns, "sandbox/other", "sandbox/gvisor", "--timeout=90s")
	})
})
