package controllers

import (
	"context"
	"fmt"
	"os/exec"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	runctrl "afe.dev/sandbox/controllers/run"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/builtin"
	"afe.dev/sandbox/internal/runexec"
	"afe.dev/sandbox/test/dockertest"
)

// waitEndedNoLeftovers waits until the Run is said ended and, at once,
// lists from the engine's side the processes of its groups and any process
// whose command line holds marker, in the container the attempt ran in.
func waitEndedNoLeftovers(ctx context.Context, run *afev1.Run, marker string, groups func(*afev1.Run) []int) *afev1.Run {
	var got *afev1.Run
	Eventually(func(g Gomega) {
		got = getRun(ctx, run)(g)
		g.Expect(got.Status.CompletionTime).NotTo(BeNil(), "phase %s", got.Status.Phase)
	}, "3m", "50ms").Should(Succeed())
	container := got.Status.ContainerID
	for _, gid := range groups(got) {
		Expect(groupProcesses(container, gid)).To(BeEmpty(), "processes of group %d outlived the Run", gid)
	}
	Expect(markedProcesses(container, marker)).To(BeEmpty(), "processes of the Run outlived it")
	return got
}

// Workload containment (docs/threat-model.md): whatever kills a Run's step
// script (the workload runs as the same uid and can), nothing the Run
// started survives its end.
var _ = Describe("Run processes after the Run ends", func() {
	var ctx context.Context
	var ns string
	BeforeEach(func() {
		ctx = context.Background()
		ns = newNamespace(ctx)
	})
	forEachRuntime(func(runtime string) {

		It("kills a background process that killed the step's script, before the Run is said ended", func() {
			sbx := newSandbox(ns, "survivor")
			sbx.Spec.Runtime = runtime
			Expect(k8sClient.Create(ctx, sbx)).To(Succeed())
			DeferCleanup(func() { deleteAndWaitGone(ctx, sbx) })
			ready := waitReady(ctx, sbx)

			run := newRun(ns, "survivor", sbx.Name)
			// $PPID, expanded by the Run's shell, is the step's script.
			run.Spec.Script = `sh -c "sleep 0.5; kill -9 $PPID; exec sleep 3601" & wait`
			run.Spec.TimeoutSeconds = ptr.To[int32](120)
			Expect(k8sClient.Create(ctx, run)).To(Succeed())
			got := waitEndedNoLeftovers(ctx, run, "sleep 3601", func(r *afev1.Run) []int {
				return []int{runexec.GID(string(r.UID), r.Status.Attempts)}
			})
			GinkgoWriter.Printf("ended %s, exit %d, after %dms\n", got.Status.Phase, *got.Status.ExitCode, got.Status.DurationMilliseconds)
			Expect(got.Status.Phase).To(Equal(afev1.RunCompleted))
			Expect(got.Status.ExitCode).To(HaveValue(BeEquivalentTo(137)), "the step's script was killed: the test attacks it")
			Expect(got.Status.TimedOut).To(HaveValue(BeFalse()))
			Expect(time.Duration(got.Status.DurationMilliseconds)*time.Millisecond).To(BeNumerically("<", time.Minute), "it ended long before its deadline")
			Expect(got.Status.ContainerID).To(Equal(ready.Status.ContainerID), "the kill worked: the sandbox kept its container")
		})

		It("kills what a git clean filter planted in a MergeAndCI lane left after killing the step, before the Run is said ended", func() {
			requireGitImage()
			sbx := newSandbox(ns, "filtered")
			sbx.Spec.Image = dockertest.GitImage
			sbx.Spec.Runtime = runtime
			Expect(k8sClient.Create(ctx, sbx)).To(Succeed())
			DeferCleanup(func() { deleteAndWaitGone(ctx, sbx) })
			ready := waitReady(ctx, sbx)
			c := ready.Status.ContainerName
			inContainer(c, gitRepo, "a", "b")
			inContainer(c, `echo from a > /workspace/lanes/a/a.txt; echo from b > /workspace/lanes/b/b.txt`)
			// The filter leaves a process in a session of its own, then kills
			// every step script (the merge step's among them), and passes the
			// file through.
			inContainer(c, `cat > /workspace/killer.sh <<'EOF'
#!/bin/sh
setsid sh -c 'exec sleep 3602' </dev/null >/dev/null 2>&1 &
for p in /proc/[0-9]*; do
	case "$(tr '\0' ' ' < "$p/cmdline" 2>/dev/null)" in
	*afe-run*) kill -9 "${p#/proc/}" 2>/dev/null && echo "killed ${p#/proc/}" >> /workspace/killer.log ;;
	esac
done
exec cat
EOF
chmod +x /workspace/killer.sh
cd /workspace/repo && git config filter.k.clean /workspace/killer.sh
echo '* filter=k' > /workspace/lanes/a/.gitattributes`)

			run := newMergeRun(ns, "filtered", sbx.Name, "a", "b")
			run.Spec.TimeoutSeconds = ptr.To[int32](120)
			Expect(k8sClient.Create(ctx, run)).To(Succeed())
			got := waitEndedNoLeftovers(ctx, run, "sleep 3602", func(r *afev1.Run) []int {
				return []int{runexec.GID(string(r.UID), r.Status.Attempts), builtin.CheckGID(string(r.UID), r.Status.Attempts, 1000)}
			})
			cond := findCondition(got.Status.Conditions, afev1.RunCompletedCondition)
			GinkgoWriter.Printf("ended %s after %dms: %s: %s\n", got.Status.Phase, got.Status.DurationMilliseconds, cond.Reason, cond.Message)
			Expect(inContainer(c, `cat /workspace/killer.log`)).To(ContainSubstring("killed"), "the filter killed the step: the test attacks it")
			Expect(got.Status.TimedOut).To(HaveValue(BeFalse()))
			Expect(time.Duration(got.Status.DurationMilliseconds)*time.Millisecond).To(BeNumerically("<", time.Minute), "it ended long before its deadline")
		})
	})
})

var _ = Describe("Run sweep after an attempt", func() {
	forEachRuntime(func(runtime string) {
		It("kills a process of the attempt found from the engine's side after a step that exited cleanly", func() {
			engine, err := docker.New("")
			Expect(err).NotTo(HaveOccurred())
			ctx := context.Background()
			c, err := engine.RunContainer(ctx, docker.ContainerSpec{Name: "afe-test-sweep-" + rand.String(6), Image: dockertest.TestImage,
				Labels: map[string]string{"afe.test": "sweep"}, Network: "none", Command: []string{"sleep", "600"}, User: "1000:1000", Init: true,
				Runtime: runtime})
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(func() { _ = engine.RemoveContainer(ctx, c.ID) })
			const gid = 2_000_000_079
			a := runctrl.Processes{Container: c.Name, ContainerID: c.ID, GID: gid, SandboxGID: 1000}
			run := &afev1.Run{Spec: afev1.RunSpec{Command: []string{"true"}}}
			r := &runctrl.Reconciler{Engine: engine}

			By("costing one look when nothing is left")
			t0 := time.Now()
			Expect(r.SweepProcesses(ctx, run, a, 1000, false)).To(BeFalse())
			GinkgoWriter.Printf("a clean sweep took %s\n", time.Since(t0))

			By("killing what a step whose script was made to exit 0 (by ptrace, say) left")
			out, err := exec.Command("docker", "exec", "-d", "--user", fmt.Sprintf("1000:%d", gid), c.ID, "sleep", "3604").CombinedOutput()
			Expect(err).NotTo(HaveOccurred(), string(out))
			Eventually(func() []string { return groupProcesses(c.ID, gid) }, "10s").ShouldNot(BeEmpty())
			Expect(r.SweepProcesses(ctx, run, a, 1000, false)).To(BeFalse(), "the kill worked: the container stays")
			Expect(groupProcesses(c.ID, gid)).To(BeEmpty())
		})
	})
})
