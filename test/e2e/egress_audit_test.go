package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/telemetry"
	"afe.dev/sandbox/test/dockertest"
)

// mustDocker runs the docker CLI, failing the spec when it fails.
func mustDocker(args ...string) {
	out, err := exec.Command("docker", args...).CombinedOutput()
	ExpectWithOffset(1, err).NotTo(HaveOccurred(), "docker %s: %s", strings.Join(args, " "), out)
}

// proxyImage is the proxy image of the specs here: AFE_PROXY_IMAGE (a
// candidate built under another tag), or afe/egress-proxy:dev.
func proxyImage() string {
	if img := os.Getenv("AFE_PROXY_IMAGE"); img != "" {
		return img
	}
	return "afe/egress-proxy:dev"
}

// The egress records of the manager binary across a SIGKILL: the proxy's
// log is read again from the last record written, so the decisions made
// while no manager ran are recorded once the next one starts, and none
// twice.
var _ = Describe("Egress telemetry of the manager binary", func() {
	It("records the proxy's decisions through a SIGKILL, those made meanwhile included, none twice", func() {
		own := newOwnCluster()
		inst := fmt.Sprintf("e2e-egress-audit-%d", os.Getpid())
		label := afev1.LabelController + "=" + inst
		defer dockertest.RemoveAll(label)
		// A network of the spec's own, with a local web server as
		// allowed.test and denied.test: nothing leaves the machine.
		egress := "afe-e2e-audit-" + inst
		mustDocker("network", "create", "--label", label, egress)
		mustDocker("run", "-d", "--label", label, "--name", egress+"-web", "--network", egress, "--network-alias", "allowed.test",
			"--network-alias", "denied.test", dockertest.TestImage, "sh", "-c", "mkdir -p /www && echo web-ok > /www/index.html && exec httpd -f -p 80 -h /www")
		db := filepath.Join(GinkgoT().TempDir(), "telemetry.db")
		start := func() *gexec.Session {
			return own.startManager("", nil, "--instance", inst, "--telemetry-db", db, "--egress-network", egress,
				"--egress-allow-private", "--proxy-image", proxyImage())
		}
		mgr := start()
		defer func() { stopManager(mgr) }()
		own.kubectl("apiVersion: sandbox.afe.dev/v1alpha1\nkind: Sandbox\nmetadata: {name: audit}\nspec: {image: afe/busybox:dev, egress: [allowed.test]}\n", "apply", "-f", "-")
		own.kubectl("", "wait", "--for=condition=Ready", "sandbox/audit", "--timeout=90s")
		fetch := func(host string) {
			// The answer does not matter (a denial is a 403): the proxy's
			// decision does.
			_ = exec.Command("docker", "exec", "afe-default.audit", "sh", "-c",
				"http_proxy=http://afe-proxy:3128 timeout 5 wget -q -O- http://"+host+"/").Run()
		}
		hosts := func() []string {
			store, err := telemetry.Open(db, telemetry.Options{})
			Expect(err).NotTo(HaveOccurred())
			defer func() { _ = store.Close() }()
			recs, err := store.ListEgress(context.Background(), telemetry.EgressFilter{Filter: telemetry.Filter{Namespace: "default", Sandbox: "audit"}})
			Expect(err).NotTo(HaveOccurred())
			// The sequence is shared with the sandbox's commands (the
			// docker execs below are recorded as the engine's): it only
			// grows.
			var out []string
			for i, r := range recs {
				if i > 0 {
					Expect(r.Seq).To(BeNumerically(">", recs[i-1].Seq), "in order, none twice: %+v", recs)
				}
				out = append(out, r.Host+" "+r.Decision)
			}
			return out
		}
		fetch("allowed.test")
		fetch("denied.test")
		Eventually(hosts, "30s", "500ms").Should(Equal([]string{"allowed.test Allowed", "denied.test Denied"}))

		By("killing the manager with SIGKILL; the sandbox asks twice more while no manager runs")
		mgr.Kill()
		Eventually(mgr, "10s").Should(gexec.Exit())
		fetch("denied.test")
		fetch("allowed.test")
		mgr = start()
		want := []string{"allowed.test Allowed", "denied.test Denied", "denied.test Denied", "allowed.test Allowed"}
		Eventually(hosts, "60s", "500ms").Should(Equal(want))
		Consistently(hosts, "5s", "1s").Should(Equal(want))
		own.kubectl("", "delete", "sandbox/audit", "--timeout=60s")
	})
})
