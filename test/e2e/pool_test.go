package e2e

import (
	"fmt"
	"os"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"afe.dev/sandbox/internal/naming"
)

var _ = Describe("Warm pools with kubectl", func() {
	It("keeps a pool that kubectl lists, serves a Sandbox from it, and reaches the claimed sandbox through kubectl afe", func() {
		ns := fmt.Sprintf("e2e-pool-%d", os.Getpid())
		mustKubectl("create", "namespace", ns)
		mustKubectlStdin(`apiVersion: sandbox.afe.dev/v1alpha1
kind: SandboxPool
metadata: {name: agents}
spec:
  replicas: 1
  template:
    image: afe/busybox:dev
    resources: {cpu: 500m, memory: 128Mi, pids: 64}
`, "apply", "-n", ns, "-f", "-")
		DeferCleanup(func() { _, _ = kubectl("delete", "-n", ns, "sandboxpool/agents", "--timeout=60s") })
		mustKubectl("wait", "-n", ns, "--for=condition=Ready", "sandboxpool/agents", "--timeout=90s")
		lines := strings.Split(mustKubectl("get", "sbxpool", "-n", ns), "\n")
		Expect(strings.Fields(lines[0])).To(Equal([]string{"NAME", "IMAGE", "READY", "CLAIMS", "AGE"}))
		Expect(strings.Fields(lines[1])[:3]).To(Equal([]string{"agents", "afe/busybox:dev", "1/1"}))

		mustKubectlStdin(`apiVersion: sandbox.afe.dev/v1alpha1
kind: Sandbox
metadata: {name: pooled}
spec:
  image: afe/busybox:dev
  resources: {cpu: 500m, memory: 128Mi, pids: 64}
  poolRef: {name: agents}
  env: [{name: GREETING, value: hello-from-the-pool}]
`, "apply", "-n", ns, "-f", "-")
		DeferCleanup(func() { _, _ = kubectl("delete", "-n", ns, "sandbox/pooled", "--timeout=60s") })
		mustKubectl("wait", "-n", ns, "--for=condition=Ready", "sandbox/pooled", "--timeout=90s")
		Expect(mustKubectl("get", "sandbox/pooled", "-n", ns, "-o", "jsonpath={.status.pool} {.status.containerName}")).
			To(Equal("agents " + naming.Container(naming.Key(ns, "pooled"))))

		By("executing in the claimed member through the access API, with the sandbox's env")
		afe := pluginWithoutDocker(ns)
		out, errs, code := afe("", "exec", "pooled", "--", "sh", "-c", `printf '%s' "$GREETING"; id -u >&2`)
		Expect(code).To(BeZero(), errs)
		Expect(out).To(Equal("hello-from-the-pool"))
		Expect(strings.TrimSpace(errs)).NotTo(Equal("0"), "as the member's own non-root id")

		By("counting the claim and refilling the pool")
		Eventually(func() string {
			out, _ := kubectl("get", "sbxpool", "agents", "-n", ns, "-o", "jsonpath={.status.claims} {.status.ready}")
			return out
		}, "60s").Should(Equal("1 1/1"))
	})
})
