package controllers

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/builtin"
	"afe.dev/sandbox/internal/runexec"
	"afe.dev/sandbox/test/dockertest"
)

// forgingFilter is the attack: a clean filter, which git starts as
// the sandbox's user while the git step runs, writes forged report lines
// into every pipe of every process it can open under /proc (the merge
// script's report channel among them), and logs where it got through. It
// spares git's own pipes, which carry the files' contents and names: git
// failing on them would end the Run GitFailed before any report mattered.
// With $1 = flood it first writes 100 MB of them, once, into every pipe of
// the merge script.
const forgingFilter = `#!/bin/sh
line='afe-builtin merged zz-forged 0123456789abcdef0123456789abcdef01234567'
log=/workspace/forger.log
if [ "$1" = flood ] && mkdir /workspace/flooded 2>/dev/null; then
	for p in /proc/[0-9]*; do
		case "$(tr '\0' ' ' < "$p/cmdline" 2>/dev/null)" in *afe-merge*) ;; *) continue ;; esac
		seen=
		for fd in "$p"/fd/*; do
			[ -p "$fd" ] || continue
			pipe=$(readlink "$fd")
			case "$seen" in *"$pipe"*) continue ;; esac
			seen="$seen $pipe"
			yes "$line" | head -c 100000000 > "$fd" 2>/dev/null && echo "flooded ${p#/proc/} $fd $pipe" >> "$log"
		done
	done
fi
for p in /proc/[0-9]*; do
	[ "${p#/proc/}" = "$$" ] && continue
	case "$(tr '\0' ' ' < "$p/cmdline" 2>/dev/null)" in
	*afe-merge*) what=merge-script ;;
	git*) continue ;;
	*) what=other ;;
	esac
	for fd in "$p"/fd/*; do
		[ -p "$fd" ] || continue
		printf '%s\n' "$line" > "$fd" 2>/dev/null && echo "wrote ${p#/proc/} $fd $what" >> "$log"
	done
done
exec cat
`

// installForgingFilter makes the forging filter, called with arg, the
// clean filter of every file of lane's worktree.
func installForgingFilter(container, lane, arg string) {
	inContainer(container, `printf '%s' "$1" > /workspace/x.sh && chmod +x /workspace/x.sh
cd /workspace/repo && git config filter.x.clean "/workspace/x.sh $3"
echo '* filter=x' > "/workspace/lanes/$2/.gitattributes"`, forgingFilter, lane, arg)
}

// memory is the test process's memory, where the manager runs.
type memory struct {
	rssKiB, peakKiB int64
	heap            uint64
}

func statusKiB(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	Expect(err).NotTo(HaveOccurred())
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			Expect(err).NotTo(HaveOccurred())
			return n
		}
	}
	Fail("no " + field + " in /proc/self/status")
	return 0
}

func readMemory() memory {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memory{rssKiB: statusKiB("VmRSS"), peakKiB: statusKiB("VmHWM"), heap: ms.HeapAlloc}
}

// watchHeap samples the heap until stop is called, and returns its peak.
func watchHeap() (stop func() uint64) {
	var mu sync.Mutex
	var peak uint64
	done := make(chan struct{})
	go func() {
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			mu.Lock()
			peak = max(peak, ms.HeapAlloc)
			mu.Unlock()
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return func() uint64 {
		close(done)
		mu.Lock()
		defer mu.Unlock()
		return peak
	}
}

// Serial: the forging workloads poll /proc and write floods, and the spec
// bounds the manager's memory meanwhile; beside the parallel specs one Run
// did not end within 3 minutes on a fresh clone's CI.
var _ = Describe("Builtin MergeAndCI report channel", Serial, func() {
	var ctx context.Context
	var ns string
	var sbx *afev1.Sandbox
	BeforeEach(func() {
		requireGitImage()
		ctx = context.Background()
		ns = newNamespace(ctx)
		sbx = newSandbox(ns, "report")
		sbx.Spec.Image = dockertest.GitImage
		Expect(k8sClient.Create(ctx, sbx)).To(Succeed())
		sbx = waitReady(ctx, sbx)
	})
	AfterEach(func() { deleteAndWaitGone(ctx, sbx) })

	It("lists no lane a filter forges into the report channel, and does not complete with it", func() {
		c := sbx.Status.ContainerName
		inContainer(c, gitRepo, "a", "b")
		inContainer(c, `echo from a > /workspace/lanes/a/a.txt; echo from b > /workspace/lanes/b/b.txt`)
		installForgingFilter(c, "a", "forge")
		run := newMergeRun(ns, "forged", sbx.Name, "a", "b")
		Expect(k8sClient.Create(ctx, run)).To(Succeed())
		got := waitRunEnded(ctx, run)

		log := inContainer(c, `cat /workspace/forger.log`)
		GinkgoWriter.Printf("forger's log:\n%s\n", log)
		Expect(log).To(MatchRegexp(`wrote \d+ \S+ merge-script`), "the filter reached the merge script's pipes: the test attacks the channel")
		// status.output is the Run's output, which the workload writes
		// anyway; nothing else of the status may carry the forgery.
		res, err := json.Marshal(got.Status.Result)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(res)).NotTo(ContainSubstring("zz-forged"))
		Expect(got.Status.Phase).To(Equal(afev1.RunFailed), "a forged report is no outcome: %s", res)
		cond := findCondition(got.Status.Conditions, afev1.RunCompletedCondition)
		GinkgoWriter.Printf("condition: %s: %s\n", cond.Reason, cond.Message)
		Expect(cond.Reason).To(Equal(afev1.ReportInvalidReason))
		Expect(cond.Message).To(ContainSubstring("names a lane that is not one of this Run's lanes"))
		Expect(cond.Message).NotTo(ContainSubstring("zz-forged"))
		Expect(got.Status.Result).To(BeEmpty())
	})

	It("fails a Run whose report channel a filter floods with 100 MB, and the manager's memory stays flat", func() {
		c := sbx.Status.ContainerName
		inContainer(c, gitRepo, "a")
		inContainer(c, `echo from a > /workspace/lanes/a/a.txt`)
		installForgingFilter(c, "a", "flood")

		before := readMemory()
		Expect(os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)).To(Succeed(), "reset VmHWM")
		stop := watchHeap()
		run := newMergeRun(ns, "flood", sbx.Name, "a")
		Expect(k8sClient.Create(ctx, run)).To(Succeed())
		// The figures are printed whether or not the Run ends.
		var got *afev1.Run
		for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			if got = getRun(ctx, run)(Default); got.Status.CompletionTime != nil {
				break
			}
		}
		heapPeak := stop()
		after := readMemory()
		log := inContainer(c, `cat /workspace/forger.log`)
		GinkgoWriter.Printf("forger's log:\n%s\n", log)
		mib := func(kib int64) float64 { return float64(kib) / 1024 }
		GinkgoWriter.Printf("manager memory: VmRSS %.1f MiB before, %.1f MiB after; peak VmRSS during the Run %.1f MiB (+%.1f MiB); "+
			"heap %.1f MiB before, %.1f MiB after, peak %.1f MiB (+%.1f MiB)\n",
			mib(before.rssKiB), mib(after.rssKiB), mib(after.peakKiB), mib(after.peakKiB-before.rssKiB),
			float64(before.heap)/(1<<20), float64(after.heap)/(1<<20), float64(heapPeak)/(1<<20), (float64(heapPeak)-float64(before.heap))/(1<<20))

		Expect(log).To(MatchRegexp(`flooded \d+ \S+ pipe:`), "the filter flooded the merge script's pipes: the test floods the channel")
		Expect(after.peakKiB-before.rssKiB).To(BeNumerically("<", 64<<10), "peak RSS growth in KiB")
		Expect(int64(heapPeak)-int64(before.heap)).To(BeNumerically("<", 64<<20), "peak heap growth")
		Expect(got.Status.CompletionTime).NotTo(BeNil(), "the Run ended")
		Expect(got.Status.Phase).To(Equal(afev1.RunFailed))
		cond := findCondition(got.Status.Conditions, afev1.RunCompletedCondition)
		Expect(cond.Reason).To(Equal(afev1.ReportInvalidReason))
		GinkgoWriter.Printf("condition: %s: %s\n", cond.Reason, cond.Message)
		Expect(got.Status.Result).To(BeEmpty())
	})

	It("fails a Run whose report does not match the repository once git has exited", func() {
		c := sbx.Status.ContainerName
		inContainer(c, gitRepo, "a", "b")
		inContainer(c, `echo from a > /workspace/lanes/a/a.txt; echo from b > /workspace/lanes/b/b.txt`)
		// Lane b's clean filter, run after lane a was committed, moves
		// lane a's branch back to main: the script reports a commit of
		// lane a that its branch no longer names.
		inContainer(c, `printf '#!/bin/sh\nenv -u GIT_DIR -u GIT_INDEX_FILE -u GIT_WORK_TREE git -C /workspace/repo update-ref refs/heads/a refs/heads/main\nexec cat\n' > /workspace/move.sh
chmod +x /workspace/move.sh
cd /workspace/repo && git config filter.move.clean /workspace/move.sh
echo '* filter=move' > /workspace/lanes/b/.gitattributes`)
		run := newMergeRun(ns, "moved", sbx.Name, "a", "b")
		Expect(k8sClient.Create(ctx, run)).To(Succeed())
		got := waitRunEnded(ctx, run)
		cond := findCondition(got.Status.Conditions, afev1.RunCompletedCondition)
		GinkgoWriter.Printf("condition: %s: %s\n", cond.Reason, cond.Message)
		Expect(got.Status.Phase).To(Equal(afev1.RunFailed))
		Expect(cond.Reason).To(Equal(afev1.ReportInvalidReason))
		Expect(cond.Message).To(MatchRegexp(`does not match the repository: it says lane a was committed as [0-9a-f]{40}, but its branch is at [0-9a-f]{40}`))
		Expect(got.Status.Result).To(BeEmpty())
	})

	It("checks the report with a group no other process of the sandbox has, out of their reach", func() {
		c := sbx.Status.ContainerName
		inContainer(c, gitRepo, "a", "b", "c", "d")
		inContainer(c, `for l in a b c d; do echo "from $l" > /workspace/lanes/$l/$l.txt; done`)
		out, err := exec.Command("docker", "exec", "-d", c, "sh", "-c", neighbourForger).CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
		DeferCleanup(func() { _, _ = dockertest.Exec(c, "touch", "/workspace/stop") })

		run := newMergeRun(ns, "neighbour", sbx.Name, "a", "b", "c", "d")
		run.Spec.CIScript = "true"
		Expect(k8sClient.Create(ctx, run)).To(Succeed())
		got := waitRunEnded(ctx, run)
		inContainer(c, `touch /workspace/stop`)
		check := builtin.CheckGID(string(got.UID), 1, 1000)
		attempt := runexec.GID(string(got.UID), 1)
		log := inContainer(c, `sort /workspace/neighbour.log | uniq -c`)
		GinkgoWriter.Printf("the neighbour's attempts (check group %d, attempt group %d):\n%s\n", check, attempt, log)
		Expect(got.Status.Phase).To(Equal(afev1.RunCompleted), findCondition(got.Status.Conditions, afev1.RunCompletedCondition).Message)
		Expect(got.Status.OK).To(HaveValue(BeTrue()), got.Status.Output)
		Expect(result(got)["lanes"]).To(HaveLen(4))
		Expect(log).To(MatchRegexp(`refused %d(\n|$)`, check), "the neighbour found the check's processes: the test tries the check's channel")
		Expect(log).To(MatchRegexp(`refused %d(\n|$)`, attempt), "the neighbour found the git step's processes")
		Expect(log).NotTo(MatchRegexp(`wrote (%d|%d)(\n|$)`, check, attempt), "a process of the Run was reached")
	})
})

// waitRunEnded waits until the Run has ended, whatever its phase.
func waitRunEnded(ctx context.Context, run *afev1.Run) *afev1.Run {
	var got *afev1.Run
	Eventually(func(g Gomega) {
		got = getRun(ctx, run)(g)
		g.Expect(got.Status.CompletionTime).NotTo(BeNil(), "phase %s", got.Status.Phase)
	}).WithTimeout(3 * time.Minute).Should(Succeed())
	return got
}

// neighbourForger stands for the workload's other processes (the sandbox's
// own command, another Run): it runs as the sandbox's user and group all
// along, and tries to write a forged line into every file descriptor of
// every other process (but init's and its own children's), logging the
// group of each process and whether it got through, until /workspace/stop
// exists.
const neighbourForger = `line='afe-check lane a - out'
while [ ! -e /workspace/stop ]; do
	for p in /proc/[0-9]*; do
		case "${p#/proc/}" in 1|$$) continue ;; esac
		g= pp=
		while read -r k r e rest; do
			case "$k" in
			PPid:) pp=$r ;;
			Gid:) g=$r; break ;;
			esac
		done < "$p/status" 2>/dev/null
		[ -z "$g" ] || [ "$pp" = $$ ] && continue
		for fd in "$p"/fd/*; do
			if printf '%s\n' "$line" 2>/dev/null > "$fd"; then echo "wrote $g"; else echo "refused $g"; fi
		done
	done
done >> /workspace/neighbour.log 2>&1`
