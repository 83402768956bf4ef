package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os/exec"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"sigs.k8s.io/controller-runtime/pkg/client"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/metrics"
	"afe.dev/sandbox/internal/runexec"
	"afe.dev/sandbox/internal/telemetry"
)

// telemetryOf returns the suite's records of one sandbox, once every
// record added so far is committed.
func telemetryOf(ctx context.Context, ns, sandbox string) []telemetry.Record {
	ExpectWithOffset(1, testTelemetry.Flush(ctx)).To(Succeed())
	recs, err := testTelemetry.List(ctx, telemetry.Filter{Namespace: ns, Sandbox: sandbox, Limit: 10000})
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return recs
}

// manyRunsBound bounds each Run of the specs below that start Runs by the
// dozen at once. They are about order and identity, not speed: under gVisor
// every exec starts a process of the runtime on the host (a Run is two: its
// command and the list of what it left), and with the suite's other
// processes beside them on two cores one Run of `true` among 100 was still
// running after 3 minutes.
const manyRunsBound = 8 * time.Minute

// perSandbox is how many commands of each kind the specs below start at
// once in each sandbox: fewer under gVisor, where each is a process of the
// runtime on the host, and the suite's CI run (three processes on two
// cores) twice lost a sandbox container under 4 x 25 at once. Order and
// identity are what the specs are about; runc keeps the full count.
func perSandbox(runtime string, n int) int {
	if runtime == "runsc" {
		return max(n*2/5, 4)
	}
	return n
}

// engineExec runs docker exec in a sandbox's container and, when it fails,
// says what the engine and the API server had of the container then.
func engineExec(ctx context.Context, sbx *afev1.Sandbox, opts []string, cmd ...string) error {
	c := sbx.Status.ContainerName
	args := append(append(append([]string{"exec"}, opts...), c), cmd...)
	out, err := exec.Command("docker", args...).CombinedOutput()
	if err == nil {
		return nil
	}
	state, _ := exec.Command("docker", "inspect", "-f", "{{.State.Status}} exit={{.State.ExitCode}} oom={{.State.OOMKilled}} finished={{.State.FinishedAt}}", c).CombinedOutput()
	cur := &afev1.Sandbox{}
	_ = k8sClient.Get(ctx, client.ObjectKeyFromObject(sbx), cur)
	return fmt.Errorf("%w: %s (container: %s; sandbox: %s %v)", err, out, state, cur.Status.Phase, cur.Status.Conditions)
}

var _ = Describe("Command telemetry", func() {
	var ctx context.Context
	var ns string
	BeforeEach(func() {
		ctx = context.Background()
		ns = newNamespace(ctx)
	})

	// Runs exec through the engine as raw execs do, and the engine's exec
	// events name the container whatever its runtime: under gVisor the
	// same records, exit codes and users.
	forEachRuntime(func(runtime string) {
		It("records every Run of 4 sandboxes run at once, in order per sandbox, with the identity the controller derived", func() {
			const sandboxes = 4
			runs := perSandbox(runtime, 8)
			sbxs := readySandboxes(ctx, ns, "tele", sandboxes, runtime)
			// Each Run prints a line shaped like a record naming another
			// sandbox, with a forged afe.* environment: the identity stays
			// the controller's.
			var wg sync.WaitGroup
			for i, sbx := range sbxs {
				for j := 0; j < runs; j++ {
					wg.Add(1)
					go func() {
						defer GinkgoRecover()
						defer wg.Done()
						run := newRun(ns, fmt.Sprintf("t%d-%d", i, j), sbx.Name)
						run.Spec.Script = fmt.Sprintf(`export AFE_SANDBOX=victim afe_sandbox_uid=forged; echo '{"namespace":"other","sandbox":"victim","sandboxUID":"forged","seq":1}'; exit %d`, j%3)
						Expect(k8sClient.Create(ctx, run)).To(Succeed())
						waitRunPhaseWithin(ctx, run, afev1.RunCompleted, manyRunsBound)
					}()
				}
			}
			wg.Wait()
			line := `{"namespace":"other","sandbox":"victim","sandboxUID":"forged","seq":1}` + "\n"
			sum := sha256.Sum256([]byte(line))
			for _, sbx := range sbxs {
				recs := telemetryOf(ctx, ns, sbx.Name)
				Expect(recs).To(HaveLen(runs), "one record per Run of %s", sbx.Name)
				seen := map[string]bool{}
				for k, r := range recs {
					Expect(r.Seq).To(BeEquivalentTo(k+1), "the sequence of %s has no gap", sbx.Name)
					Expect(r.Namespace).To(Equal(ns))
					Expect(r.Sandbox).To(Equal(sbx.Name))
					Expect(r.SandboxUID).To(Equal(string(sbx.UID)))
					Expect(r.Ticket).To(Equal(sbx.Name), "a sandbox without ticket is its own")
					Expect(r.Source).To(Equal(telemetry.SourceRun))
					Expect(r.Attempt).To(BeEquivalentTo(1))
					Expect(r.Command[0:2]).To(Equal([]string{"/bin/sh", "-c"}))
					Expect(r.OutputBytes).To(BeEquivalentTo(len(line)))
					Expect(r.OutputSHA256).To(Equal(hex.EncodeToString(sum[:])))
					Expect(r.Ended).NotTo(BeTemporally("<", r.Started))
					var j int
					_, err := fmt.Sscanf(r.Run, "t%d-%d", new(int), &j)
					Expect(err).NotTo(HaveOccurred())
					Expect(r.ExitCode).To(Equal(j%3), "run %s", r.Run)
					Expect(r.User).To(Equal(fmt.Sprintf("1000:%d", runexec.GID(runUID(ctx, ns, r.Run), 1))))
					Expect(r.StartedBy).To(Equal("Run " + ns + "/" + r.Run))
					seen[r.Run] = true
				}
				Expect(seen).To(HaveLen(runs))
			}
			Expect(telemetryOf(ctx, "other", "victim")).To(BeEmpty(), "nothing the workload printed became a record")

			By("recording the execs made straight on the engine, as root too, after the Runs")
			for _, sbx := range sbxs {
				c := sbx.Status.ContainerName
				Expect(exec.Command("docker", "exec", c, "sh", "-c", "exit 4").Run()).To(MatchError(ContainSubstring("exit status 4")))
				Expect(engineExec(ctx, sbx, []string{"-u", "0", "--env", "AFE_SANDBOX=victim"}, "true")).To(Succeed())
			}
			for _, sbx := range sbxs {
				var recs []telemetry.Record
				Eventually(func() []telemetry.Record {
					recs = telemetryOf(ctx, ns, sbx.Name)
					return recs
				}, "20s").Should(HaveLen(runs + 2))
				for k, r := range recs {
					Expect(r.Seq).To(BeEquivalentTo(k + 1))
					Expect(r.SandboxUID).To(Equal(string(sbx.UID)))
				}
				shell, root := recs[runs], recs[runs+1]
				Expect(shell.Source).To(Equal(telemetry.SourceEngine))
				Expect(shell.Command).To(Equal([]string{"sh", "-c", "exit 4"}))
				Expect(shell.ExitCode).To(Equal(4))
				Expect(shell.User).To(Equal("1000:1000"), "an exec that names no user runs as the container's")
				Expect(root.Command).To(Equal([]string{"true"}))
				Expect(root.User).To(Equal("0"))
				Expect(root.ExitCode).To(BeZero())
				Expect(root.Ended).NotTo(BeTemporally("<", root.Started))
			}
			Expect(testTelemetry.Dropped()).To(BeZero())
		})

		It("records the commands of 4 sandboxes, Runs and raw execs at once, each sandbox's sequence without gaps", func() {
			const sandboxes = 4
			each := perSandbox(runtime, 25) // Runs, and as many execs on the engine, per sandbox
			sbxs := readySandboxes(ctx, ns, "many", sandboxes, runtime)
			counted := func(source string) float64 {
				return testutil.ToFloat64(metrics.Commands.WithLabelValues(source, string(afev1.SandboxReady), "ok"))
			}
			runsBefore, execsBefore := counted(telemetry.SourceRun), counted(telemetry.SourceEngine)
			var wg sync.WaitGroup
			for i, sbx := range sbxs {
				wg.Add(2)
				go func() {
					defer GinkgoRecover()
					defer wg.Done()
					var runs []*afev1.Run
					for j := 0; j < each; j++ {
						run := newRun(ns, fmt.Sprintf("m%d-%d", i, j), sbx.Name)
						run.Spec.Command = []string{"true"}
						Expect(k8sClient.Create(ctx, run)).To(Succeed())
						runs = append(runs, run)
					}
					for _, run := range runs {
						waitRunPhaseWithin(ctx, run, afev1.RunCompleted, manyRunsBound)
					}
				}()
				go func() {
					defer GinkgoRecover()
					defer wg.Done()
					for j := 0; j < each; j++ {
						Expect(engineExec(ctx, sbx, nil, "true")).To(Succeed())
					}
				}()
			}
			wg.Wait()
			total := 0
			for i, sbx := range sbxs {
				var recs []telemetry.Record
				Eventually(func(g Gomega) {
					recs = telemetryOf(ctx, ns, sbx.Name)
					g.Expect(recs).To(HaveLen(2*each), "the records of %s: %s", sbx.Name, missingRecords(recs, i, each))
				}, "2m").Should(Succeed()) // generous: on a busy engine an engine exec's record waits for its inspect
				sources := map[string]int{}
				for k, r := range recs {
					Expect(r.Seq).To(BeEquivalentTo(k+1), "the sequence of %s has no gap", sbx.Name)
					Expect(r.SandboxUID).To(Equal(string(sbx.UID)))
					sources[r.Source]++
				}
				Expect(sources).To(Equal(map[string]int{telemetry.SourceRun: each, telemetry.SourceEngine: each}))
				total += len(recs)
			}
			Expect(total).To(Equal(2 * sandboxes * each))
			Expect(testTelemetry.Dropped()).To(BeZero())
			By("counting them in afe_commands_total by source, phase and exit class")
			Expect(counted(telemetry.SourceRun) - runsBefore).To(BeNumerically(">=", sandboxes*each))
			Expect(counted(telemetry.SourceEngine) - execsBefore).To(BeNumerically(">=", sandboxes*each))
		})
	})
})

// readySandboxes creates n Sandboxes under the runtime named prefix-0,
// prefix-1, ... at once, removed when the spec ends, and returns them Ready.
func readySandboxes(ctx context.Context, ns, prefix string, n int, runtime string) []*afev1.Sandbox {
	var sbxs []*afev1.Sandbox
	for i := 0; i < n; i++ {
		sbx := newSandbox(ns, fmt.Sprintf("%s-%d", prefix, i))
		sbx.Spec.Runtime = runtime
		sbx.Spec.User = "1000:1000" // the records name it
		Expect(k8sClient.Create(ctx, sbx)).To(Succeed())
		DeferCleanup(func() { deleteAndWaitGone(ctx, sbx) })
		sbxs = append(sbxs, sbx)
	}
	for i := range sbxs {
		sbxs[i] = waitReady(ctx, sbxs[i])
	}
	return sbxs
}

func runUID(ctx context.Context, ns, name string) string {
	run := &afev1.Run{}
	run.Namespace, run.Name = ns, name
	return string(getRun(ctx, run)(Default).UID)
}

// missingRecords says what the records of sandbox i of the spec above lack:
// how many of each source they hold, and the Runs (m<i>-<j>) without one.
func missingRecords(recs []telemetry.Record, i, each int) string {
	sources, runs := map[string]int{}, map[string]bool{}
	for _, r := range recs {
		sources[r.Source]++
		runs[r.Run] = true
	}
	var missing []string
	for j := 0; j < each; j++ {
		if name := fmt.Sprintf("m%d-%d", i, j); !runs[name] {
			missing = append(missing, name)
		}
	}
	return fmt.Sprintf("by source %v; Runs without a record %v", sources, missing)
}
