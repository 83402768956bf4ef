// Package e2e runs the built manager binary against a local control plane and
// the local Docker engine, and drives it with kubectl as a user would.
package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/hack/controlplane"
	"afe.dev/sandbox/test/dockertest"
	"afe.dev/sandbox/test/testenv"
)

var (
	root        = filepath.Join("..", "..")
	cp          *controlplane.ControlPlane
	managerBin  string
	manager     *gexec.Session
	instance    = fmt.Sprintf("e2e-%d", os.Getpid())
	probeAddr   string
	metricsAddr string
)

// ownPlane labels the specs `make test` runs in a second process of this
// suite beside the first (go test -args -ginkgo.label-filter=own-plane, and
// '!own-plane' in the first), so that the suite takes half the time. Such a
// spec runs on a control plane and managers of its own, and names its
// Tickets, Sandboxes and pools as no spec of the other process does: the
// engine's objects are named after namespace and name alone, so the two
// processes' objects must never share those.
var ownPlane = Label("own-plane")

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	suite, reporter := GinkgoConfiguration()
	// make test keeps each spec's time (go test passes no ginkgo flags to
	// one package of several).
	if path := os.Getenv("AFE_E2E_REPORT"); path != "" {
		reporter.JSONReport = path
	}
	RunSpecs(t, "e2e suite", suite, reporter)
}

var _ = BeforeSuite(func() {
	SetDefaultEventuallyTimeout(90 * time.Second)
	SetDefaultEventuallyPollingInterval(200 * time.Millisecond)
	_, skip, err := dockertest.Require()
	Expect(err).NotTo(HaveOccurred())
	if skip != "" {
		Skip(skip)
	}
	_, err = exec.LookPath("kubectl")
	Expect(err).NotTo(HaveOccurred(), "kubectl is needed")

	managerBin = os.Getenv("AFE_MANAGER_BIN")
	if managerBin == "" {
		managerBin, err = gexec.Build("afe.dev/sandbox/cmd/manager")
		Expect(err).NotTo(HaveOccurred())
	}
	cp = ownControlPlane()
	startManager()
})

var _ = AfterSuite(func() {
	if manager != nil {
		manager.Signal(syscall.SIGTERM)
		Eventually(manager, 20*time.Second).Should(gexec.Exit())
	}
	if cp != nil {
		Expect(cp.Stop()).To(Succeed())
	}
	gexec.CleanupBuildArtifacts()
	dockertest.RemoveAll(afev1.LabelController + "=" + instance)
})

// ownControlPlane starts a local control plane with the CRDs, so that a
// manager started against it is the only controller there.
func ownControlPlane() *controlplane.ControlPlane {
	assets, err := testenv.AssetsDir()
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	c, err := controlplane.Start(GinkgoT().TempDir(), assets, filepath.Join(root, "config", "crd", "bases"))
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return c
}

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

// startManager starts the manager binary as `make run` would.
func startManager() {
	probeAddr, metricsAddr = freeAddr(), freeAddr()
	cmd := exec.Command(managerBin,
		"--instance", instance,
		"--metrics-bind-address", metricsAddr,
		"--health-probe-bind-address", probeAddr,
		"--resync-period", "30s",
		// The access API, as make run serves it (its Service is not
		// config/default's, which a spec dry-runs here).
		"--access-bind-address", "127.0.0.1:0",
		"--access-service", "afe-local/access",
		"--access-register",
		"--access-external-name", "localhost",
	)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cp.Kubeconfig)
	var err error
	manager, err = gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
	Expect(err).NotTo(HaveOccurred())
}

// kubectl runs kubectl against the local control plane.
func kubectl(args ...string) (string, error) {
	cmd := exec.Command("kubectl", append([]string{"--kubeconfig", cp.Kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// pluginBin is the kubectl plugin: AFE_KUBECTL_AFE_BIN, or built here.
func pluginBin() string {
	if p := os.Getenv("AFE_KUBECTL_AFE_BIN"); p != "" {
		return p
	}
	p, err := gexec.Build("afe.dev/sandbox/cmd/kubectl-afe")
	Expect(err).NotTo(HaveOccurred())
	return p
}

func mustKubectlStdin(stdin string, args ...string) string {
	cmd := exec.Command("kubectl", append([]string{"--kubeconfig", cp.Kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	ExpectWithOffset(1, err).NotTo(HaveOccurred(), "kubectl %s: %s", strings.Join(args, " "), out)
	return strings.TrimSpace(string(out))
}

func mustKubectl(args ...string) string {
	out, err := kubectl(args...)
	ExpectWithOffset(1, err).NotTo(HaveOccurred(), "kubectl %s: %s", strings.Join(args, " "), out)
	return out
}
