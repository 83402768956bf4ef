package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/test/dockertest"
)

// The manager as it is deployed: the ServiceAccount of config/rbac, bound
// to the generated ClusterRole and nothing else, not an administrator. A
// verb the controller needs and the role lacks shows as a refusal of the
// API server, and the lifecycle below does not complete.
var _ = Describe("The manager with the RBAC it ships", func() {
	It("runs a ticket's whole lifecycle as its own ServiceAccount, with no request refused", func() {
		own := newOwnCluster()
		inst := fmt.Sprintf("e2e-rbac-%d", os.Getpid())
		defer dockertest.RemoveAll(afev1.LabelController + "=" + inst)
		k := func(stdin string, args ...string) string {
			cmd := exec.Command("kubectl", append([]string{"--kubeconfig", own.Kubeconfig}, args...)...)
			cmd.Stdin = strings.NewReader(stdin)
			out, err := cmd.CombinedOutput()
			ExpectWithOffset(1, err).NotTo(HaveOccurred(), "kubectl %s: %s", strings.Join(args, " "), out)
			return strings.TrimSpace(string(out))
		}

		By("binding the generated role to the ServiceAccount, as config/rbac does")
		k("", "create", "namespace", "system")
		for _, f := range []string{"service_account.yaml", "role.yaml", "role_binding.yaml"} {
			k("", "apply", "-f", filepath.Join(root, "config", "rbac", f))
		}
		token := k("", "create", "token", "controller-manager", "-n", "system", "--duration", "1h")
		saConfig := filepath.Join(GinkgoT().TempDir(), "kubeconfig")
		raw, err := os.ReadFile(own.Kubeconfig)
		Expect(err).NotTo(HaveOccurred())
		Expect(os.WriteFile(saConfig, raw, 0o600)).To(Succeed())
		sa := func(args ...string) string {
			out, err := exec.Command("kubectl", append([]string{"--kubeconfig", saConfig}, args...)...).CombinedOutput()
			ExpectWithOffset(1, err).NotTo(HaveOccurred(), "kubectl %s: %s", strings.Join(args, " "), out)
			return strings.TrimSpace(string(out))
		}
		sa("config", "set-credentials", "controller-manager", "--token", token)
		sa("config", "set-context", "--current", "--user", "controller-manager")
		Expect(sa("auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")).To(Equal("system:serviceaccount:system:controller-manager"))
		canI := func(verb, resource string) string {
			out, _ := exec.Command("kubectl", "--kubeconfig", saConfig, "auth", "can-i", verb, resource, "-A").CombinedOutput()
			return strings.TrimSpace(string(out))
		}
		Expect(canI("get", "secrets")).To(Equal("yes"))
		for _, verb := range []string{"list", "watch", "create", "update", "delete"} {
			Expect(canI(verb, "secrets")).To(Equal("no"), "Secrets: get only, never %s", verb)
		}
		Expect(canI("create", "pods")).To(Equal("no"))

		By("starting the manager with that identity, serving the access API as config/manager does")
		// The Service is the deployment's (config/manager/access_service.yaml);
		// with no cluster network here, an ExternalName to the manager's port.
		accessAddr := freeAddr()
		_, accessPort, _ := strings.Cut(accessAddr, ":")
		k(`apiVersion: v1
kind: Namespace
metadata: {name: afe-system}
---
apiVersion: v1
kind: Service
metadata: {name: afe-access, namespace: afe-system}
spec:
  type: ExternalName
  externalName: localhost
  ports: [{name: https, port: `+accessPort+`}]
`, "apply", "-f", "-")
		out := gbytes.NewBuffer()
		defer stopManager(own.startManager(saConfig, out, "--instance", inst,
			"--access-bind-address", accessAddr, "--access-register", "--access-service", "afe-system/afe-access", "--access-service-port", accessPort))

		By("a ticket with a Secret in its env, egress, a Run, then Done")
		k(`apiVersion: v1
kind: Secret
metadata: {name: token, namespace: default}
stringData: {value: s3cret}
---
apiVersion: sandbox.afe.dev/v1alpha1
kind: Ticket
metadata: {name: rbac, namespace: default}
spec:
  sandbox:
    image: afe/busybox:dev
    egress: [allowed.test]
    env: [{name: TOKEN, valueFrom: {secretKeyRef: {name: token, key: value}}}]
`, "apply", "-f", "-")
		k("", "wait", "-n", "default", "--for=jsonpath={.status.phase}=Ready", "ticket/rbac", "--timeout=90s")
		k(`apiVersion: sandbox.afe.dev/v1alpha1
kind: Run
metadata: {name: rbac-run, namespace: default}
spec: {sandboxRef: {name: rbac}, script: 'echo "$TOKEN"'}
`, "apply", "-f", "-")
		k("", "wait", "-n", "default", "--for=jsonpath={.status.phase}=Completed", "run/rbac-run", "--timeout=60s")
		Expect(k("", "get", "-n", "default", "run/rbac-run", "-o", "jsonpath={.status.output}")).To(Equal("s3cret"))
		Eventually(func() string {
			return k("", "get", "events", "-n", "default", "--field-selector", "involvedObject.name=rbac-run", "-o", "jsonpath={.items[*].reason}")
		}).ShouldNot(BeEmpty(), "Events are recorded")
		By("exec through the access API, its checks made with that identity (TokenReview, SubjectAccessReview, the front proxy's CA)")
		k("", "wait", "--for=condition=Available", "apiservice/v1alpha1.access.sandbox.afe.dev", "--timeout=60s")
		execOut, err := exec.Command(pluginBin(), "--kubeconfig", own.Kubeconfig, "-n", "default", "exec", "rbac", "--", "sh", "-c", `echo "in $TOKEN"`).CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(execOut))
		Expect(string(execOut)).To(Equal("in s3cret\n"))
		k("", "delete", "apiservice/v1alpha1.access.sandbox.afe.dev")
		k("", "patch", "-n", "default", "ticket/rbac", "--type=merge", "-p", `{"spec":{"state":"Done"}}`)
		k("", "wait", "-n", "default", "--for=jsonpath={.status.phase}=Finished", "ticket/rbac", "--timeout=90s")
		Eventually(func() ([]string, error) { return dockertest.Objects(afev1.LabelController + "=" + inst) }).Should(BeEmpty())
		k("", "delete", "-n", "default", "ticket/rbac", "run/rbac-run", "--timeout=60s")

		Expect(bytes.Contains(out.Contents(), []byte("forbidden"))).To(BeFalse(), "the API server refused a request:\n%s",
			grepLines(string(out.Contents()), "forbidden"))
	})
})

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
