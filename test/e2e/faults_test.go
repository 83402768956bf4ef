package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/telemetry"
	"afe.dev/sandbox/test/dockertest"
)

// The controller reaches the engine through a forwarder the test cuts: it
// starts while the engine is down, says so in conditions, deletes nothing,
// and repairs what happened meanwhile once the engine is back.
var _ = Describe("Engine faults", func() {
	It("survives the engine going away and coming back", func() {
		own := newOwnCluster()
		fwd, err := dockertest.NewForwarder(filepath.Join(GinkgoT().TempDir(), "docker.sock"))
		Expect(err).NotTo(HaveOccurred())
		defer fwd.Cut()
		inst := fmt.Sprintf("e2e-faults-%d", os.Getpid())
		defer dockertest.RemoveAll(afev1.LabelController + "=" + inst)
		k := func(args ...string) { own.kubectl("", args...) }
		sandbox := func(name string) string {
			return fmt.Sprintf("apiVersion: sandbox.afe.dev/v1alpha1\nkind: Sandbox\nmetadata: {name: %s}\nspec: {image: afe/busybox:dev}\n", name)
		}
		apply := func(yaml string) { own.kubectl(yaml, "apply", "-f", "-") }

		By("starting while the engine is down")
		fwd.Cut()
		probe := freeAddr()
		mgr := own.startManager("", nil, "--instance", inst, "--docker-host", fwd.Host(),
			"--health-probe-bind-address", probe, "--resync-period", "1h")
		defer stopManager(mgr)
		readyz := func() int {
			resp, err := http.Get("http://" + probe + "/readyz")
			if err != nil {
				return 0
			}
			_ = resp.Body.Close()
			return resp.StatusCode
		}
		Eventually(readyz).Should(Equal(http.StatusInternalServerError), "not ready without an engine")
		Consistently(mgr, "1s").ShouldNot(gexec.Exit())
		apply(sandbox("early"))
		Eventually(own.reason("sandbox/early", "Ready")).Should(Equal(afev1.EngineUnavailableReason))

		By("catching up when the engine comes back")
		Expect(fwd.Restore()).To(Succeed())
		Eventually(readyz).Should(Equal(http.StatusOK))
		k("wait", "--for=condition=Ready", "sandbox/early", "--timeout=60s")
		before, err := dockertest.Inspect("afe-default.early")
		Expect(err).NotTo(HaveOccurred())
		// steady is left alone through the outage; quiet loses its container
		// during it without any change of its spec, so only the resync after
		// the reconnect can see that.
		apply(sandbox("steady"))
		apply(sandbox("quiet"))
		k("wait", "--for=condition=Ready", "sandbox/steady", "sandbox/quiet", "--timeout=60s")
		steady, err := dockertest.Inspect("afe-default.steady")
		Expect(err).NotTo(HaveOccurred())
		quiet, err := dockertest.Inspect("afe-default.quiet")
		Expect(err).NotTo(HaveOccurred())

		By("cutting the engine: conditions say so, nothing is deleted")
		fwd.Cut()
		k("patch", "sandbox/early", "--type=merge", "-p", `{"spec":{"resources":{"pids":300}}}`)
		Eventually(own.reason("sandbox/early", "Ready")).Should(Equal(afev1.EngineUnavailableReason))
		Expect(dockertest.Objects(afev1.LabelController + "=" + inst)).To(ConsistOf(
			"container/afe-default.early", "volume/afe-default.early_ws",
			"container/afe-default.steady", "volume/afe-default.steady_ws",
			"container/afe-default.quiet", "volume/afe-default.quiet_ws"))
		// Losses while the controller cannot see the engine.
		Expect(dockertest.RemoveContainer("afe-default.early")).To(Succeed())
		Expect(dockertest.RemoveContainer("afe-default.quiet")).To(Succeed())
		Consistently(func() ([]string, error) {
			return dockertest.Objects(afev1.LabelController + "=" + inst)
		}, "2s").Should(ConsistOf("volume/afe-default.early_ws", "container/afe-default.steady", "volume/afe-default.steady_ws",
			"volume/afe-default.quiet_ws"), "nothing is deleted while the engine is away")

		By("restoring: the stream reconnects, a resync runs, the loss is repaired")
		restored := time.Now()
		Expect(fwd.Restore()).To(Succeed())
		k("wait", "--for=condition=Ready", "sandbox/early", "--timeout=60s")
		GinkgoWriter.Printf("engine restored: sandbox Ready again after %s\n", time.Since(restored))
		after, err := dockertest.Inspect("afe-default.early")
		Expect(err).NotTo(HaveOccurred())
		Expect(after.ID).NotTo(Equal(before.ID))
		Expect(*after.HostConfig.PidsLimit).To(Equal(int64(300)), "the spec changed during the outage")
		Expect(own.get("sandbox/early", "{.status.recreations}")()).To(Equal("1"))
		Eventually(func() bool {
			c, err := dockertest.Inspect("afe-default.quiet")
			return err == nil && c.State.Running && c.ID != quiet.ID
		}, "60s").Should(BeTrue(), "the resync after the reconnect repairs a loss nothing else points at")
		Eventually(own.get("sandbox/quiet", "{.status.recreations}")).Should(Equal("1"))
		now, err := dockertest.Inspect("afe-default.steady")
		Expect(err).NotTo(HaveOccurred())
		Expect(now.ID).To(Equal(steady.ID), "an untouched sandbox keeps its container through the outage")
		Expect(own.get("sandbox/steady", "{.status.recreations}")()).To(BeElementOf("", "0"))

		By("seeing losses from the reconnected event stream")
		lost := time.Now()
		Expect(dockertest.RemoveContainer("afe-default.early")).To(Succeed())
		Eventually(func() bool {
			c, err := dockertest.Inspect("afe-default.early")
			return err == nil && c.State.Running && c.ID != after.ID
		}, "30s", "20ms").Should(BeTrue(), "the sweep runs hourly here: only the event stream (reconnecting within 5 s) can see this")
		GinkgoWriter.Printf("loss after reconnect: replaced after %s\n", time.Since(lost))
		k("delete", "sandbox/early", "sandbox/steady", "sandbox/quiet", "--timeout=60s")
		Expect(dockertest.Objects(afev1.LabelController + "=" + inst)).To(BeEmpty())
	})

	It("records an exec made on the engine while the manager's event stream was cut, once", func() {
		own := newOwnCluster()
		fwd, err := dockertest.NewForwarder(filepath.Join(GinkgoT().TempDir(), "docker.sock"))
		Expect(err).NotTo(HaveOccurred())
		defer fwd.Cut()
		Expect(fwd.Restore()).To(Succeed())
		inst := fmt.Sprintf("e2e-faults-tele-%d", os.Getpid())
		defer dockertest.RemoveAll(afev1.LabelController + "=" + inst)
		db := filepath.Join(GinkgoT().TempDir(), "telemetry.db")
		mgr := own.startManager("", nil, "--instance", inst, "--docker-host", fwd.Host(), "--telemetry-db", db, "--resync-period", "1h")
		defer stopManager(mgr)
		own.kubectl("apiVersion: sandbox.afe.dev/v1alpha1\nkind: Sandbox\nmetadata: {name: gap}\nspec: {image: afe/busybox:dev}\n", "apply", "-f", "-")
		own.kubectl("", "wait", "--for=condition=Ready", "sandbox/gap", "--timeout=90s")
		store, err := telemetry.Open(db, telemetry.Options{})
		Expect(err).NotTo(HaveOccurred())
		defer func() { _ = store.Close() }()
		records := func() []telemetry.Record {
			recs, err := store.List(context.Background(), telemetry.Filter{Namespace: "default", Sandbox: "gap"})
			Expect(err).NotTo(HaveOccurred())
			return recs
		}
		out, err := exec.Command("docker", "exec", "afe-default.gap", "sh", "-c", "exit 4").CombinedOutput()
		Expect(err).To(HaveOccurred(), string(out))
		Eventually(records, "20s").Should(HaveLen(1), "the positive control: an exec seen live")

		By("cutting the manager off the engine while someone execs straight on it")
		fwd.Cut()
		out, err = exec.Command("docker", "exec", "afe-default.gap", "sh", "-c", "exit 5").CombinedOutput()
		Expect(err).To(HaveOccurred(), string(out))
		Expect(fwd.Restore()).To(Succeed())
		Eventually(records, "30s").Should(HaveLen(2), "the stream started again since its last event replays the exec")
		Consistently(records, "3s").Should(HaveLen(2), "and only once")
		recs := records()
		Expect(recs[1].Command).To(Equal([]string{"sh", "-c", "exit 5"}))
		Expect(recs[1].ExitCode).To(Equal(5))
		Expect(recs[1].Seq).To(BeEquivalentTo(2))
		own.kubectl("", "delete", "sandbox/gap", "--timeout=60s")
	})
})
