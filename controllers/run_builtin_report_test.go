package controllers

import (
	"context"
	"encoding/json"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	afev1 "afe.dev/sandbox/api/v1alpha1"
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

var _ = Describe("Builtin MergeAndCI report channel", func() {
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
