package e2e

import (
	"context"
	"encoding/json"
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

// The telemetry of the manager binary across a SIGKILL: every Run it said
// ended is recorded, and the sandbox's sequence goes on after the restart.
var _ = Describe("Command telemetry of the manager binary", func() {
	It("keeps every record of an ended Run through a SIGKILL, and goes on counting", func() {
		own := newOwnCluster()
		inst := fmt.Sprintf("e2e-telemetry-%d", os.Getpid())
		defer dockertest.RemoveAll(afev1.LabelController + "=" + inst)
		db := filepath.Join(GinkgoT().TempDir(), "telemetry.db")
		start := func() *gexec.Session {
			// The access API too, for kubectl afe telemetry.
			return own.startManager("", nil, "--instance", inst, "--telemetry-db", db,
				"--access-bind-address", "127.0.0.1:0", "--access-service", "afe-local/access", "--access-register",
				"--access-external-name", "localhost")
		}
		mgr := start()
		defer func() { stopManager(mgr) }()
		own.kubectl("apiVersion: sandbox.afe.dev/v1alpha1\nkind: Sandbox\nmetadata: {name: tele}\nspec: {image: afe/busybox:dev}\n", "apply", "-f", "-")
		own.kubectl("", "wait", "--for=condition=Ready", "sandbox/tele", "--timeout=90s")
		runs := func(from, to int) {
			for i := from; i <= to; i++ {
				own.kubectl(fmt.Sprintf("apiVersion: sandbox.afe.dev/v1alpha1\nkind: Run\nmetadata: {name: r%d}\nspec: {sandboxRef: {name: tele}, script: 'echo %d'}\n", i, i), "apply", "-f", "-")
				own.kubectl("", "wait", "--for=jsonpath={.status.phase}=Completed", fmt.Sprintf("run/r%d", i), "--timeout=60s")
			}
		}
		runs(1, 3)
		By("killing the manager with SIGKILL right after the third Run ended")
		mgr.Kill()
		Eventually(mgr, "10s").Should(gexec.Exit())
		out, err := exec.Command("docker", "exec", "afe-default.tele", "sh", "-c", "exit 7").CombinedOutput()
		Expect(err).To(HaveOccurred(), string(out)) // exit 7, while no manager watches
		mgr = start()
		runs(4, 5)

		By("reading them with kubectl afe telemetry, as a table and as JSON, by sandbox and by ticket")
		plugin := pluginBin()
		afe := func(args ...string) string {
			cmd := exec.Command(plugin, append([]string{"--kubeconfig", own.Kubeconfig, "-n", "default"}, args...)...)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			ExpectWithOffset(1, err).NotTo(HaveOccurred(), "kubectl afe %s: %s%s", strings.Join(args, " "), out, stderr.String())
			return string(out)
		}
		var table string
		Eventually(func() error { // the APIService is answered once the manager serves it
			cmd := exec.Command(plugin, "--kubeconfig", own.Kubeconfig, "-n", "default", "telemetry", "tele")
			out, err := cmd.CombinedOutput()
			table = string(out)
			return err
		}, "60s", "500ms").Should(Succeed(), func() string { return table })
		lines := strings.Split(strings.TrimSpace(table), "\n")
		Expect(lines).To(HaveLen(6), "a header and the five Runs:\n%s", table)
		Expect(lines[0]).To(HavePrefix("SEQ"))
		for i, l := range lines[1:] {
			Expect(strings.Fields(l)[0]).To(Equal(fmt.Sprint(i+1)), l)
			Expect(l).To(ContainSubstring(fmt.Sprintf("r%d#1", i+1)))
		}
		list := &telemetry.RecordList{}
		Expect(json.Unmarshal([]byte(afe("telemetry", "tele", "-o", "json")), list)).To(Succeed())
		Expect(list.Items).To(HaveLen(5))
		for i, r := range list.Items {
			Expect(r.Seq).To(BeEquivalentTo(i + 1))
			Expect(r.Run).To(Equal(fmt.Sprintf("r%d", i+1)))
			Expect(r.Command).To(Equal([]string{"/bin/sh", "-c", fmt.Sprintf("echo %d", i+1)}))
			Expect(r.Source).To(Equal(telemetry.SourceRun))
		}
		byTicket := &telemetry.RecordList{}
		Expect(json.Unmarshal([]byte(afe("telemetry", "--ticket", "tele", "-o", "json")), byTicket)).To(Succeed())
		Expect(byTicket.Items).To(Equal(list.Items), "a sandbox without ticket is its own ticket")

		own.kubectl("", "delete", "sandbox/tele", "--timeout=60s")
		stopManager(mgr)
		mgr = nil

		store, err := telemetry.Open(db, telemetry.Options{})
		Expect(err).NotTo(HaveOccurred())
		defer func() { _ = store.Close() }()
		recs, err := store.List(context.Background(), telemetry.Filter{Namespace: "default", Sandbox: "tele"})
		Expect(err).NotTo(HaveOccurred())
		var got []string
		for i, r := range recs {
			Expect(r.Seq).To(BeEquivalentTo(i+1), "no gap: %+v", recs)
			got = append(got, r.Run)
		}
		// The exec made while no manager ran went unseen: the engine's
		// event stream is read from the manager's start.
		Expect(got).To(Equal([]string{"r1", "r2", "r3", "r4", "r5"}))
	})
})
