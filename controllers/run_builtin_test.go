package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/telemetry"
	"afe.dev/sandbox/test/dockertest"
)

// requireGitImage skips (fails under CI) without the afe/git:dev image.
func requireGitImage() {
	skip, err := dockertest.RequireImage(dockertest.GitImage)
	Expect(err).NotTo(HaveOccurred())
	if skip != "" {
		Skip(skip)
	}
}

// gitRepo sets up /workspace/repo with shared.txt on main, and a worktree
// /workspace/lanes/<lane> on a new branch per lane.
const gitRepo = `set -e
cd /workspace
git init -q -b main repo && cd repo
printf 'one\ntwo\nthree\n' > shared.txt
git add -A && git -c user.name=t -c user.email=t@t commit -q -m base
for l in "$@"; do git worktree add -q -b "$l" "../lanes/$l" main; done`

func inContainer(container, script string, args ...string) string {
	out, err := dockertest.Exec(container, append([]string{"sh", "-c", script, "sh"}, args...)...)
	Expect(err).NotTo(HaveOccurred(), out)
	return out
}

func newMergeRun(ns, name, sandbox string, lanes ...afev1.GitRefName) *afev1.Run {
	run := newRun(ns, name, sandbox)
	run.Spec.Builtin = afev1.BuiltinMergeAndCI
	run.Spec.Lanes = lanes
	run.Spec.BaseRef = "main"
	run.Spec.CIScript = `echo "ci in $(pwd)"; ls; test -f a.txt && test -f b.txt`
	return run
}

// result decodes status.result into a map of plain values.
func result(run *afev1.Run) map[string]any {
	out := map[string]any{}
	for k, v := range run.Status.Result {
		var x any
		Expect(json.Unmarshal(v.Raw, &x)).To(Succeed())
		out[k] = x
	}
	return out
}

// reexecute makes the controller execute a finished Run again as after a
// crash: the status says an attempt was in flight, and a change of the
// sandbox brings the Run back to the reconciler.
func reexecute(ctx context.Context, run *afev1.Run, sbx *afev1.Sandbox) {
	got := getRun(ctx, run)(Default)
	patch := client.MergeFrom(got.DeepCopy())
	got.Status.Phase = afev1.RunRunning
	got.Status.CompletionTime = nil
	Expect(k8sClient.Status().Patch(ctx, got, patch)).To(Succeed())
	// Nudged on every poll: the first nudge may reach the controller
	// before its cache shows the Run Running again.
	Eventually(func(g Gomega) {
		cur := getSandbox(ctx, sbx)(g)
		p := client.MergeFrom(cur.DeepCopy())
		cur.Annotations = map[string]string{"test/nudge": fmt.Sprint(time.Now().UnixNano())}
		g.Expect(k8sClient.Patch(ctx, cur, p)).To(Succeed())
		g.Expect(getRun(ctx, run)(g).Status.Attempts).To(Equal(got.Status.Attempts + 1))
	}).WithPolling(500 * time.Millisecond).Should(Succeed())
}

var _ = Describe("Builtin MergeAndCI", func() {
	var ctx context.Context
	var ns string
	var sbx *afev1.Sandbox
	BeforeEach(func() {
		requireGitImage()
		ctx = context.Background()
		ns = newNamespace(ctx)
		sbx = newSandbox(ns, "lanes")
		sbx.Spec.Image = dockertest.GitImage
		// Given to ciScript as to any command executed for the tenant.
		sbx.Spec.Env = []afev1.EnvVar{{Name: "SUITE", Value: "test_x"}}
		Expect(k8sClient.Create(ctx, sbx)).To(Succeed())
		sbx = waitReady(ctx, sbx)
	})
	AfterEach(func() { deleteAndWaitGone(ctx, sbx) })

	It("merges two lanes touching different files, passes CI, and gives the same result when executed again", func() {
		c := sbx.Status.ContainerName
		inContainer(c, gitRepo, "a", "b")
		inContainer(c, `echo from a > /workspace/lanes/a/a.txt; echo from b > /workspace/lanes/b/b.txt`)
		run := newMergeRun(ns, "merge", sbx.Name, "a", "b")
		Expect(k8sClient.Create(ctx, run)).To(Succeed())
		got := waitRunPhase(ctx, run, afev1.RunCompleted)
		GinkgoWriter.Printf("MergeAndCI of two lanes: %dms\n", got.Status.DurationMilliseconds)
		Expect(got.Status.OK).To(HaveValue(BeTrue()), got.Status.Output)
		Expect(*got.Status.ExitCode).To(BeZero())
		res := result(got)
		Expect(res).To(HaveKeyWithValue("merged", true))
		Expect(res).To(HaveKeyWithValue("conflicts", BeEmpty()))
		Expect(res).To(HaveKeyWithValue("ci_passed", true))
		Expect(res["ci_output"]).To(ContainSubstring("ci in /workspace/lanes/integration"))
		Expect(res).To(HaveKeyWithValue("integration_branch", "integration"))
		Expect(res["integration_commit"]).To(MatchRegexp("^[0-9a-f]{40}$"))
		Expect(res["lanes"]).To(HaveLen(2))
		Expect(got.Status.Output).To(ContainSubstring("running ciScript"))

		By("recording the attempt in the telemetry as a builtin, by its name, with its output's measure")
		Expect(testTelemetry.Flush(ctx)).To(Succeed())
		records, err := testTelemetry.List(ctx, telemetry.Filter{Namespace: ns, Sandbox: sbx.Name})
		Expect(err).NotTo(HaveOccurred())
		Expect(records).To(ContainElement(And(
			HaveField("Run", run.Name), HaveField("Attempt", int32(1)), HaveField("Source", telemetry.SourceBuiltin),
			HaveField("Command", Equal([]string{"builtin", string(afev1.BuiltinMergeAndCI)})),
			HaveField("SandboxUID", string(sbx.UID)), HaveField("ExitCode", 0),
			HaveField("OutputBytes", int64(len(got.Status.Output))))))

		By("committing as afe, with the lane and the Run in the message, as the sandbox's user")
		log := inContainer(c, `cd /workspace/repo && git log -1 --format='%an <%ae> %s' a; stat -c %u /workspace/lanes/integration/a.txt`)
		Expect(log).To(HavePrefix("afe <afe@sandbox.invalid> afe: lane a, Run merge\n"))
		user, _ := containerUser(c)
		uid, _, _ := strings.Cut(user, ":")
		Expect(log).To(HaveSuffix("\n" + uid))

		By("executing it again after a crash, with litter in the integration worktree")
		inContainer(c, `cd /workspace/lanes/integration && echo litter > litter.txt && echo changed > shared.txt`)
		reexecute(ctx, run, sbx)
		again := waitRunPhase(ctx, run, afev1.RunCompleted)
		Expect(again.Status.Attempts).To(Equal(int32(2)))
		Expect(again.Status.OK).To(HaveValue(BeTrue()), again.Status.Output)
		Expect(again.Status.Result).To(Equal(got.Status.Result))
		Expect(inContainer(c, `ls /workspace/lanes/integration`)).NotTo(ContainSubstring("litter"))
	})

	It("reports a conflict with its files, aborts the merge and stops", func() {
		c := sbx.Status.ContainerName
		inContainer(c, gitRepo, "a", "b", "c")
		inContainer(c, `cd /workspace/lanes && printf 'one\nTWO a\nthree\n' > a/shared.txt && printf 'one\nTWO b\nthree\n' > b/shared.txt && echo c > c/c.txt`)
		run := newMergeRun(ns, "conflict", sbx.Name, "a", "b", "c")
		Expect(k8sClient.Create(ctx, run)).To(Succeed())
		got := waitRunPhase(ctx, run, afev1.RunCompleted)
		Expect(got.Status.OK).To(HaveValue(BeFalse()))
		Expect(*got.Status.ExitCode).To(Equal(int32(1)))
		res := result(got)
		Expect(res).To(HaveKeyWithValue("merged", false))
		Expect(res["conflicts"]).To(Equal([]any{map[string]any{"lane": "b", "files": []any{"shared.txt"}}}))
		Expect(res).To(HaveKeyWithValue("ci_passed", false))
		Expect(res).To(HaveKeyWithValue("ci_output", ""))
		Expect(res["lanes"]).To(HaveLen(1), "a merged, c never tried")
		Expect(inContainer(c, `cd /workspace/lanes/integration && git status --porcelain && ls`)).NotTo(ContainSubstring("UU"))
	})

	It("reports a failing CI with its output", func() {
		c := sbx.Status.ContainerName
		inContainer(c, gitRepo, "a", "b")
		inContainer(c, `echo a > /workspace/lanes/a/a.txt`)
		run := newMergeRun(ns, "redci", sbx.Name, "a", "b")
		run.Spec.CIScript = `echo "$SUITE FAILED: expected 2, got 3" >&2; exit 3`
		Expect(k8sClient.Create(ctx, run)).To(Succeed())
		got := waitRunPhase(ctx, run, afev1.RunCompleted)
		Expect(got.Status.OK).To(HaveValue(BeFalse()))
		Expect(*got.Status.ExitCode).To(Equal(int32(3)))
		res := result(got)
		Expect(res).To(HaveKeyWithValue("merged", true))
		Expect(res).To(HaveKeyWithValue("ci_passed", false))
		Expect(res).To(HaveKeyWithValue("ci_exit_code", BeNumerically("==", 3)))
		Expect(res["ci_output"]).To(Equal("test_x FAILED: expected 2, got 3\n"))
	})

	It("still merges lanes with nothing to commit", func() {
		c := sbx.Status.ContainerName
		inContainer(c, gitRepo, "a", "b")
		inContainer(c, `cd /workspace/lanes/a && echo a > a.txt && git add a.txt && git -c user.name=t -c user.email=t@t commit -q -m done-by-hand`)
		run := newMergeRun(ns, "clean", sbx.Name, "a", "b")
		run.Spec.CIScript = `test -f a.txt`
		run.Spec.IntegrationBranch = "release/next"
		Expect(k8sClient.Create(ctx, run)).To(Succeed())
		got := waitRunPhase(ctx, run, afev1.RunCompleted)
		Expect(got.Status.OK).To(HaveValue(BeTrue()), got.Status.Output)
		res := result(got)
		Expect(res).To(HaveKeyWithValue("merged", true))
		Expect(res["lanes"]).To(HaveLen(2))
		Expect(res).To(HaveKeyWithValue("integration_branch", "release/next"))
		Expect(inContainer(c, `cd /workspace/repo && git log --format=%s -1 a`)).To(Equal("done-by-hand"))
	})

	It("kills ciScript with everything it started at the deadline", func() {
		c := sbx.Status.ContainerName
		inContainer(c, gitRepo, "a")
		run := newMergeRun(ns, "slowci", sbx.Name, "a")
		run.Spec.CIScript = "sleep 1001 & sleep 1002"
		run.Spec.TimeoutSeconds = ptr.To[int32](6)
		Expect(k8sClient.Create(ctx, run)).To(Succeed())
		waitRunPhase(ctx, run, afev1.RunRunning)
		for _, m := range []string{"sleep 1001", "sleep 1002"} {
			Eventually(func() []string { return leftovers(c, m) }, "5s", "50ms").ShouldNot(BeEmpty(), "%q runs while the Run does", m)
		}
		got := waitRunPhase(ctx, run, afev1.RunTimedOut)
		Expect(got.Status.TimedOut).To(HaveValue(BeTrue()))
		Expect(leftovers(c, "sleep 1001")).To(BeEmpty())
		Expect(leftovers(c, "sleep 1002")).To(BeEmpty())
		res := result(got)
		Expect(res).To(HaveKeyWithValue("merged", true), "the merge is done before the CI")
		Expect(res).To(HaveKeyWithValue("ci_passed", false))
	})

	It("fails with a condition without a repository, without a lane's branch, or without git", func() {
		run := newMergeRun(ns, "norepo", sbx.Name, "a")
		Expect(k8sClient.Create(ctx, run)).To(Succeed())
		got := waitRunPhase(ctx, run, afev1.RunFailed)
		Expect(findCondition(got.Status.Conditions, afev1.RunCompletedCondition).Reason).To(Equal(afev1.RepositoryNotFoundReason))

		inContainer(sbx.Status.ContainerName, gitRepo, "a")
		run = newMergeRun(ns, "nolane", sbx.Name, "a", "ghost")
		Expect(k8sClient.Create(ctx, run)).To(Succeed())
		got = waitRunPhase(ctx, run, afev1.RunFailed)
		c := findCondition(got.Status.Conditions, afev1.RunCompletedCondition)
		Expect(c.Reason).To(Equal(afev1.RefNotFoundReason))
		Expect(c.Message).To(ContainSubstring("Lane ghost has no branch"))

		plain := newSandbox(ns, "nogit")
		Expect(k8sClient.Create(ctx, plain)).To(Succeed())
		waitReady(ctx, plain)
		defer deleteAndWaitGone(ctx, plain)
		run = newMergeRun(ns, "nogit", plain.Name, "a")
		Expect(k8sClient.Create(ctx, run)).To(Succeed())
		got = waitRunPhase(ctx, run, afev1.RunFailed)
		c = findCondition(got.Status.Conditions, afev1.RunCompletedCondition)
		Expect(c.Reason).To(Equal(afev1.GitNotFoundReason))
		Expect(c.Message).To(ContainSubstring("git is not installed"))
	})

	It("refuses invalid builtin specs at admission", func() {
		mk := func(mutate func(*afev1.Run)) error {
			run := newMergeRun(ns, "invalid", sbx.Name, "a", "b")
			mutate(run)
			return k8sClient.Create(ctx, run)
		}
		for _, tc := range []struct {
			mutate func(*afev1.Run)
			msg    string
		}{
			{func(r *afev1.Run) { r.Spec.Script = "true" }, "exactly one of command, script and builtin"},
			{func(r *afev1.Run) { r.Spec.BaseRef = "" }, "needs lanes, baseRef and ciScript"},
			{func(r *afev1.Run) { r.Spec.CIScript = "" }, "needs lanes, baseRef and ciScript"},
			{func(r *afev1.Run) { r.Spec.Builtin = afev1.BuiltinSnapshot }, "only for builtin MergeAndCI"},
			{func(r *afev1.Run) { r.Spec.Lanes = []afev1.GitRefName{"a", "-rf"} }, "spec.lanes[1]"},
			{func(r *afev1.Run) { r.Spec.Lanes = []afev1.GitRefName{"../../etc"} }, "spec.lanes[0]"},
			{func(r *afev1.Run) { r.Spec.Lanes = []afev1.GitRefName{"a..b"} }, "no '..'"},
			{func(r *afev1.Run) { r.Spec.Lanes = []afev1.GitRefName{"x.lock"} }, ".lock"},
			{func(r *afev1.Run) { r.Spec.Lanes = []afev1.GitRefName{"a", "a"} }, "Duplicate value"},
			{func(r *afev1.Run) { r.Spec.Lanes = []afev1.GitRefName{"integration"} }, "must not be one of the lanes"},
			{func(r *afev1.Run) { r.Spec.BaseRef = "$(reboot)" }, "spec.baseRef"},
			{func(r *afev1.Run) { r.Spec.Lanes = nil }, "needs lanes"},
		} {
			Expect(mk(tc.mutate)).To(MatchError(ContainSubstring(tc.msg)))
		}
		snap := newRun(ns, "snap-ok", sbx.Name)
		snap.Spec.Builtin = afev1.BuiltinSnapshot
		Expect(k8sClient.Create(ctx, snap, client.DryRunAll)).To(Succeed())
	})
})
