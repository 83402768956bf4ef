package e2e

import (
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"

	"afe.dev/sandbox/hack/controlplane"
)

// ownCluster is a control plane of one spec's own, so that the managers the
// spec starts on it are the only controllers there. It stops when the spec
// ends, after the spec's own defers (so after its managers).
type ownCluster struct {
	*controlplane.ControlPlane
}

func newOwnCluster() *ownCluster {
	c := &ownCluster{ControlPlane: ownControlPlane()}
	DeferCleanup(func() { Expect(c.Stop()).To(Succeed()) })
	return c
}

// kubectl runs kubectl in the namespace default with stdin, and fails the
// spec when it fails.
func (c *ownCluster) kubectl(stdin string, args ...string) string {
	cmd := exec.Command("kubectl", append([]string{"--kubeconfig", c.Kubeconfig, "-n", "default"}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	ExpectWithOffset(1, err).NotTo(HaveOccurred(), "kubectl %s: %s", strings.Join(args, " "), out)
	return strings.TrimSpace(string(out))
}

// get polls a JSONPath of an object of the namespace default ("" while it
// cannot be read).
func (c *ownCluster) get(obj, path string) func() string {
	return func() string {
		out, _ := exec.Command("kubectl", "--kubeconfig", c.Kubeconfig, "-n", "default", "get", obj, "-o", "jsonpath="+path).CombinedOutput()
		return strings.TrimSpace(string(out))
	}
}

// reason polls the reason of one of an object's conditions.
func (c *ownCluster) reason(obj, cond string) func() string {
	return c.get(obj, `{.status.conditions[?(@.type=="`+cond+`")].reason}`)
}

// condition polls "reason: message" of one of an object's conditions, read
// together: a reason with the message of another write is never seen.
func (c *ownCluster) condition(obj, cond string) func() string {
	return c.get(obj, `{.status.conditions[?(@.type=="`+cond+`")].reason}: {.status.conditions[?(@.type=="`+cond+`")].message}`)
}

// startManager starts the manager binary with the kubeconfig (the
// cluster's, unless another identity is given), its metrics and probes off
// unless args set them (the last of a repeated flag wins); its stderr goes
// to stderr as well as to the spec's log when stderr is not nil.
func (c *ownCluster) startManager(kubeconfig string, stderr io.Writer, args ...string) *gexec.Session {
	if kubeconfig == "" {
		kubeconfig = c.Kubeconfig
	}
	cmd := exec.Command(managerBin, append([]string{"--metrics-bind-address", "0", "--health-probe-bind-address", "0"}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	errs := io.Writer(GinkgoWriter)
	if stderr != nil {
		errs = io.MultiWriter(GinkgoWriter, stderr)
	}
	s, err := gexec.Start(cmd, GinkgoWriter, errs)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return s
}

// stopManager stops a manager with SIGTERM and waits for it; nil is none.
func stopManager(s *gexec.Session) {
	if s == nil {
		return
	}
	s.Signal(syscall.SIGTERM)
	EventuallyWithOffset(1, s, 20*time.Second).Should(gexec.Exit())
}
