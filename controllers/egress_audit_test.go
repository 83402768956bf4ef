package controllers

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/telemetry"
)

// egressOf returns the suite's egress records of one sandbox, once every
// record added so far is committed.
func egressOf(ctx context.Context, ns, sandbox string) []telemetry.EgressRecord {
	ExpectWithOffset(1, testTelemetry.Flush(ctx)).To(Succeed())
	recs, err := testTelemetry.ListEgress(ctx, telemetry.EgressFilter{Filter: telemetry.Filter{Namespace: ns, Sandbox: sandbox, Limit: 10000}})
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return recs
}

var _ = Describe("Egress audit", func() {
	It("records a Run's allowed and denied requests from its proxy's log, naming the Run, in order with the Run's record, and nothing the workload printed; one Event for a host first denied", func() {
		ctx := context.Background()
		ns := newNamespace(ctx)
		sbx := newSandbox(ns, "audit")
		sbx.Spec.Egress = []afev1.EgressHost{"allowed.test"}
		Expect(k8sClient.Create(ctx, sbx)).To(Succeed())
		DeferCleanup(func() { deleteAndWaitGone(ctx, sbx) })
		sbx = waitReady(ctx, sbx)

		// The workload prints a decision line of its own, naming another
		// sandbox's kind of host, to its stdout: the Run's output, not a
		// proxy's log.
		forged := "afe-egress v1 time=1764907494.123 ms=1 client=172.19.0.9 status=TCP_TUNNEL/200 why=- up=1 down=1 method=CONNECT url=forged.test:443"
		run := newRun(ns, "fetch", sbx.Name)
		run.Spec.Command = []string{"sh", "-c", "export http_proxy=http://afe-proxy:3128; " +
			"timeout 5 wget -q -O- http://allowed.test/; timeout 5 wget -q -O- http://denied.test/; timeout 5 wget -q -O- http://denied.test/x; " +
			"echo '" + forged + "'; sleep 2; true"}
		Expect(k8sClient.Create(ctx, run)).To(Succeed())
		waitRunPhase(ctx, run, afev1.RunCompleted)

		var eg []telemetry.EgressRecord
		Eventually(func() int {
			eg = egressOf(ctx, ns, sbx.Name)
			return len(eg)
		}, "20s").Should(Equal(3))
		Consistently(func() int { return len(egressOf(ctx, ns, sbx.Name)) }, "3s", "500ms").Should(Equal(3))
		Expect(eg[0].Host).To(Equal("allowed.test"))
		Expect(eg[0].Decision).To(Equal("Allowed"))
		Expect(eg[0].Port).To(Equal(80))
		Expect(eg[0].BytesDown).To(BeNumerically(">", 0))
		Expect(eg[1].Host).To(Equal("denied.test"))
		Expect(eg[1].Decision).To(Equal("Denied"))
		Expect(eg[1].Reason).To(Equal("host"))
		Expect(eg[2].Host).To(Equal("denied.test"))

		By("one Event on the Sandbox for the host first denied, not one per request")
		denials := func() int {
			n := 0
			for _, r := range eventReasons(ctx, ns, sbx) {
				if r == "EgressDenied" {
					n++
				}
			}
			return n
		}
		Eventually(denials).Should(Equal(1))
		Consistently(denials, "2s", "500ms").Should(Equal(1))
		for _, r := range eg {
			Expect(r.SandboxUID).To(Equal(string(sbx.UID)))
			Expect(r.Proxy).NotTo(BeEmpty())
			Expect(r.Running).To(Equal([]string{"Run/fetch"}), "the Run that made the request, the only command running")
		}

		By("in one sequence with the Run's own record, which comes at its end")
		var runRec *telemetry.Record
		Eventually(func() *telemetry.Record {
			for _, r := range telemetryOf(ctx, ns, sbx.Name) {
				if r.Run == "fetch" {
					runRec = &r
				}
			}
			return runRec
		}).ShouldNot(BeNil())
		Expect(eg[0].Seq).To(BeNumerically("<", eg[1].Seq))
		Expect(eg[2].Seq).To(BeNumerically("<", runRec.Seq))
		Expect(eg[0].Time).To(BeTemporally(">=", runRec.Started.Add(-time.Second)))

		By("adding the records up in the sandbox's usage")
		want := eg[0].BytesUp + eg[0].BytesDown + eg[1].BytesUp + eg[1].BytesDown + eg[2].BytesUp + eg[2].BytesDown
		Eventually(func(g Gomega) {
			u := servedUsage(ctx, g, sbx)
			g.Expect(u.Usage.EgressDenials).To(BeEquivalentTo(2))
			g.Expect(u.Usage.EgressBytes).To(Equal(want))
		}, "60s", "1s").Should(Succeed())
	})
})
