package controllers

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/controllers/config"
	runctrl "afe.dev/sandbox/controllers/run"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/runexec"
	"afe.dev/sandbox/test/dockertest"
)

// process is one live process of a container, as a view the workload
// cannot touch shows it: its group IDs (real, effective, saved), state
// and command line.
type process struct {
	pid         string
	gids        [3]string
	state, args string
}

func (p process) String() string {
	return p.pid + " " + strings.Join(p.gids[:], " ") + " " + p.state + " " + p.args
}

// kernelProcessList prints, for every process of a gVisor kernel, one line:
// pid, real, effective and saved gid, state, command line. A process that
// ends while it is read is left out; the list itself ends with success.
const kernelProcessList = `for d in /proc/[0-9]*; do
  g=""; st=""; while read -r k a b c rest; do case "$k" in Gid:) g="$a $b $c";; State:) st=$a;; esac; done < "$d/status" 2>/dev/null
  [ -n "$g" ] && [ -n "$st" ] && echo "${d#/proc/} $g $st $(tr '\0' ' ' < "$d/cmdline" 2>/dev/null)"
done
exit 0`

// containerProcesses lists the processes of a container, independently of
// the controller's own listing (docker.Client.Processes), so that a wrong
// list there fails the specs: the engine's `docker top` under runc. Under
// gVisor the workload's processes are not host processes (`docker top`
// lists host processes there, whatever their PIDs), so the list is the
// gVisor kernel's own /proc, read by an exec as the container's uid 0,
// bounded in time (an exec into a gVisor sandbox that died can hang). A
// container that is gone, or not running, has none.
func containerProcesses(container string) []process {
	rt, err := exec.Command("docker", "inspect", "-f", "{{.HostConfig.Runtime}}", container).Output()
	if err != nil {
		return nil
	}
	var lines []string
	if userSpaceKernel(strings.TrimSpace(string(rt))) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, "docker", "exec", "-u", "0:0", container, "sh", "-c", kernelProcessList).Output()
		if err != nil {
			// A container that stopped meanwhile has no processes; one
			// that runs and cannot be listed fails the spec.
			running, _ := exec.Command("docker", "inspect", "-f", "{{.State.Running}}", container).Output()
			Expect(strings.TrimSpace(string(running))).NotTo(Equal("true"), "list the processes of %s: %v", container, err)
			return nil
		}
		lines = strings.Split(string(out), "\n")
	} else {
		out, err := exec.Command("docker", "top", container, "-eo", "pid,rgid,egid,sgid,stat,args").Output()
		if err != nil {
			return nil
		}
		lines = strings.Split(string(out), "\n")[1:]
	}
	var ps []process
	for _, line := range lines {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		ps = append(ps, process{pid: f[0], gids: [3]string{f[1], f[2], f[3]}, state: f[4], args: strings.Join(f[5:], " ")})
	}
	return ps
}

// groupProcesses lists the live processes of the container whose real,
// effective or saved group is gid; a container that is gone has none.
func groupProcesses(container string, gid int) []string {
	var found []string
	for _, p := range containerProcesses(container) {
		if !strings.HasPrefix(p.state, "Z") && slices.Contains(p.gids[:], strconv.Itoa(gid)) {
			found = append(found, p.String())
		}
	}
	return found
}

// markedProcesses lists the processes of the container whose command line
// holds marker.
func markedProcesses(container, marker string) []string {
	var found []string
	for _, p := range containerProcesses(container) {
		if strings.Contains(p.args, marker) {
			found = append(found, p.String())
		}
	}
	return found
}

// Workload containment (docs/threat-model.md): a Run ends at its deadline
// whatever its processes do. Serial: the workloads here (fork bombs,
// fork-hoppers, floods of processes) measure what they do to the engine
// and the host's process table against bounds of seconds, which the other
// processes' specs on two cores would stretch.
var _ = Describe("Run deadlines against hostile workloads", Serial, func() {
	forEachRuntime(func(runtime string) {
		var ctx context.Context
		var ns string
		var sbx *afev1.Sandbox
		BeforeEach(func() {
			ctx = context.Background()
			ns = newNamespace(ctx)
			sbx = newSandbox(ns, "hostile")
			sbx.Spec.Runtime = runtime
			Expect(k8sClient.Create(ctx, sbx)).To(Succeed())
			sbx = waitReady(ctx, sbx)
			DeferCleanup(func() { deleteAndWaitGone(ctx, sbx) })
		})

		const timeout = 3
		// endsTimedOut runs the script with a deadline of timeout seconds and
		// checks that the Run ends TimedOut within timeout + runctrl.KillGrace (and the
		// controller's own latency), with nothing of it left in the sandbox.
		endsTimedOut := func(name, script string) *afev1.Run {
			run := newRun(ns, name, sbx.Name)
			run.Spec.Script = script
			run.Spec.TimeoutSeconds = ptr.To[int32](timeout)
			Expect(k8sClient.Create(ctx, run)).To(Succeed())
			running := waitRunPhase(ctx, run, afev1.RunRunning)
			gid := runexec.GID(string(running.UID), running.Status.Attempts)
			var got *afev1.Run
			Eventually(func(g Gomega) {
				got = getRun(ctx, run)(g)
				g.Expect(got.Status.Phase.Terminal()).To(BeTrue())
			}, "30s", "50ms").Should(Succeed())
			Expect(got.Status.Phase).To(Equal(afev1.RunTimedOut), "status %+v", got.Status)
			Expect(got.Status.TimedOut).To(HaveValue(BeTrue()))
			Expect(got.Status.Attempts).To(BeEquivalentTo(1))
			took := time.Duration(got.Status.DurationMilliseconds) * time.Millisecond
			over := took - timeout*time.Second
			GinkgoWriter.Printf("%s: TimedOut %s after its deadline (grace %s): %s\n", name, over, runctrl.KillGrace,
				meta.FindStatusCondition(got.Status.Conditions, afev1.RunCompletedCondition).Message)
			Expect(over).To(BeNumerically("<", runctrl.KillGrace+2*time.Second), "the Run ended %s after its deadline", over)
			// Nothing of the attempt in the container it ran in, nor in the
			// sandbox's container now (a recreated one, if it came to that).
			Expect(groupProcesses(running.Status.ContainerID, gid)).To(BeEmpty())
			now := waitReady(ctx, sbx)
			Expect(groupProcesses(now.Status.ContainerID, gid)).To(BeEmpty())
			return got
		}

		It("ends a fork-hopper, which forks and exits faster than a kill can find it", func() {
			endsTimedOut("hopper", `echo start; hop() { hop & exit 0; }; hop & sleep 600`)
		})

		// A daemon in a session of its own, holding the exec's output open. On
		// a moby engine a stream is closed at most 2 s after the exec's main
		// process exits (daemon/monitor.go waits that long for its copies), so
		// a daemon holds a Run's stream only while the command itself runs:
		// here the command waits past the deadline.
		It("ends a Run whose daemon, in its own session, holds the output open", func() {
			run := newRun(ns, "daemon-seen", sbx.Name)
			run.Spec.Script = `setsid sh -c 'echo daemon up; exec sleep 701' & echo main waits; sleep 600`
			run.Spec.TimeoutSeconds = ptr.To[int32](60)
			Expect(k8sClient.Create(ctx, run)).To(Succeed())
			running := waitRunPhase(ctx, run, afev1.RunRunning)
			gid := runexec.GID(string(running.UID), running.Status.Attempts)
			Eventually(func() string { return strings.Join(groupProcesses(running.Status.ContainerID, gid), "\n") }, "10s").
				Should(ContainSubstring("sleep 701"), "the daemon runs, with the Run's group")
			Expect(k8sClient.Delete(ctx, running)).To(Succeed())
			Eventually(func() []string { return groupProcesses(running.Status.ContainerID, gid) }, "15s").Should(BeEmpty())

			got := endsTimedOut("daemon", `setsid sh -c 'echo daemon up; exec sleep 701' & echo main waits; sleep 600`)
			Expect(got.Status.Output).To(ContainSubstring("main waits"))
		})

		It("ends a workload that kills every process not its own, the killer included", func() {
			// Every process of another group, but for the sandbox's keep-alive
			// and init (killing those would end the sandbox itself).
			endsTimedOut("killer", `me=""; while read -r k a rest; do [ "$k" = Gid: ] && me=$a; done < /proc/self/status
while :; do
  for s in /proc/[0-9]*/status; do
    g=""; pp=""; while read -r k a rest; do
      case "$k" in Gid:) g=$a;; PPid:) pp=$a;; esac
    done < "$s" 2>/dev/null
    p=${s#/proc/}; p=${p%/status}
    [ -n "$g" ] && [ "$g" != "$me" ] && [ "$p" != 1 ] && [ "$pp" != 1 ] && kill -9 "$p" 2>/dev/null
  done
done`)
		})
	})
})

// killless is the real engine, but the kill script never runs: what a
// workload that kills the killer, or outpaces it, amounts to.
type killless struct{ docker.Engine }

func (k killless) Exec(ctx context.Context, container string, spec docker.ExecSpec) (int, error) {
	if len(spec.Cmd) > 3 && spec.Cmd[3] == "afe-kill" {
		return 0, nil
	}
	return k.Engine.Exec(ctx, container, spec)
}

// Serial, as the deadlines above: EndProcesses is held to KillGrace and
// a margin.
var _ = Describe("Run deadline fallback", Serial, func() {
	forEachRuntime(func(runtime string) {
		It("removes the sandbox container when processes of the attempt survive every kill", func() {
			engine, err := docker.New("")
			Expect(err).NotTo(HaveOccurred())
			ctx := context.Background()
			// Not this instance's labels: the sweep would remove the container.
			labels := map[string]string{"afe.test": "fallback-" + rand.String(6)}
			c, err := engine.RunContainer(ctx, docker.ContainerSpec{Name: "afe-test-fallback-" + rand.String(6), Image: dockertest.TestImage,
				Labels: labels, Network: "none", Command: []string{"sleep", "600"}, User: "1000:1000", Init: true, Runtime: runtime})
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(func() { _ = engine.RemoveContainer(ctx, c.ID) })
			a := runctrl.Processes{Container: c.Name, ContainerID: c.ID, GID: 2_000_000_077, SandboxGID: 1000}
			_, err = engine.Exec(ctx, c.ID, docker.ExecSpec{Cmd: []string{"sh", "-c", "sleep 600 >/dev/null 2>&1 &"}, User: "1000:2000000077"})
			Expect(err).NotTo(HaveOccurred())

			r := &runctrl.Reconciler{Engine: killless{engine}}
			t0 := time.Now()
			Expect(r.EndProcesses(ctx, a, 1000)).To(BeTrue(), "the container had to go")
			// Bounded by the kill's grace, not by the minute a process list
			// may wait: generous past the grace, as a loaded engine's removal
			// of the container took 2.5 s once.
			Expect(time.Since(t0)).To(BeNumerically("<", runctrl.KillGrace+15*time.Second))
			_, err = engine.InspectContainer(ctx, c.ID)
			Expect(err).To(MatchError(docker.ErrNotFound))

			// With the kill working, the container stays.
			c2, err := engine.RunContainer(ctx, docker.ContainerSpec{Name: "afe-test-fallback-" + rand.String(6), Image: dockertest.TestImage,
				Labels: labels, Network: "none", Command: []string{"sleep", "600"}, User: "1000:1000", Init: true, Runtime: runtime})
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(func() { _ = engine.RemoveContainer(ctx, c2.ID) })
			_, err = engine.Exec(ctx, c2.ID, docker.ExecSpec{Cmd: []string{"sh", "-c", "sleep 600 >/dev/null 2>&1 &"}, User: "1000:2000000077"})
			Expect(err).NotTo(HaveOccurred())
			a2 := runctrl.Processes{Container: c2.Name, ContainerID: c2.ID, GID: 2_000_000_077, SandboxGID: 1000}
			Expect((&runctrl.Reconciler{Engine: engine}).EndProcesses(ctx, a2, 1000)).To(BeFalse())
			Expect(groupProcesses(c2.ID, 2_000_000_077)).To(BeEmpty())
		})
	})
})

var _ = Describe("Run attempts and slots", func() {
	var ctx context.Context
	var ns string
	BeforeEach(func() {
		ctx = context.Background()
		ns = newNamespace(ctx)
	})
	forEachRuntime(func(runtime string) {

		It("kills what is left of an interrupted attempt before it executes the Run again", func() {
			sbx := newSandbox(ns, "again")
			sbx.Spec.Runtime = runtime
			sbx.Spec.User = "1000:1000" // the leftover below is the sandbox's uid
			Expect(k8sClient.Create(ctx, sbx)).To(Succeed())
			DeferCleanup(func() { deleteAndWaitGone(ctx, sbx) })
			ready := waitReady(ctx, sbx)
			run := newRun(ns, "again", sbx.Name)
			// The gids of every process the attempt sees, its own among them.
			run.Spec.Script = `for s in /proc/[0-9]*/status; do while read -r k a rest; do [ "$k" = Gid: ] && echo "gid $a"; done < "$s"; done 2>/dev/null | sort -u`
			Expect(k8sClient.Create(ctx, run)).To(Succeed())
			first := waitRunPhase(ctx, run, afev1.RunCompleted)
			old := runexec.GID(string(first.UID), 1)
			Expect(first.Status.Output).To(ContainSubstring(fmt.Sprintf("gid %d\n", old)), "the scan sees the attempt's own group")

			By("leaving a process of attempt 1 running, as a controller that crashed during it does")
			out, err := exec.Command("docker", "exec", "-d", "--user", fmt.Sprintf("1000:%d", old), ready.Status.ContainerName,
				"sh", "-c", "exec sleep 702").CombinedOutput()
			Expect(err).NotTo(HaveOccurred(), string(out))
			Eventually(func() []string { return groupProcesses(ready.Status.ContainerID, old) }, "10s").
				Should(ContainElement(ContainSubstring("sleep 702")))
			reexecute(ctx, first, sbx)
			second := waitRunPhase(ctx, run, afev1.RunCompleted)
			Expect(second.Status.Attempts).To(BeEquivalentTo(2))
			Expect(second.Status.Output).To(ContainSubstring(fmt.Sprintf("gid %d\n", runexec.GID(string(first.UID), 2))))
			Expect(second.Status.Output).NotTo(ContainSubstring(fmt.Sprintf("gid %d\n", old)), "attempt 2 ran beside a process of attempt 1")
			Expect(groupProcesses(ready.Status.ContainerID, old)).To(BeEmpty())
		})

		It("ends a Run Failed with AttemptsExhausted once maxAttempts attempts were cut short", func() {
			// The sandbox exists but cannot become Ready (its image cannot be
			// pulled), so the Run waits while its status is set: a Run in
			// flight whose sandbox is gone would end SandboxDeleted instead.
			sbx := newSandbox(ns, "later")
			sbx.Spec.Runtime = runtime
			sbx.Spec.Image = fmt.Sprintf("127.0.0.1:1/afe/missing-%d:never", GinkgoParallelProcess())
			Expect(k8sClient.Create(ctx, sbx)).To(Succeed())
			DeferCleanup(func() { deleteAndWaitGone(ctx, sbx) })
			waitCondition(ctx, sbx, afev1.ContainerReadyCondition, "False", afev1.ImagePullFailedReason)
			run := newRun(ns, "crashy", "later")
			run.Spec.Command = []string{"echo", "executed"}
			run.Spec.MaxAttempts = ptr.To[int32](2)
			Expect(k8sClient.Create(ctx, run)).To(Succeed())
			pending := waitRunPhase(ctx, run, afev1.RunPending)
			// As a controller that crashed during its second attempt left it.
			crashed := pending.DeepCopy()
			crashed.Status.Phase, crashed.Status.Attempts = afev1.RunRunning, 2
			Expect(k8sClient.Status().Patch(ctx, crashed, client.MergeFrom(pending))).To(Succeed())
			Eventually(func(g Gomega) {
				cur := getSandbox(ctx, sbx)(g)
				cur.Spec.Image = dockertest.TestImage
				g.Expect(k8sClient.Update(ctx, cur)).To(Succeed())
			}).Should(Succeed())
			got := waitRunPhase(ctx, run, afev1.RunFailed)
			c := meta.FindStatusCondition(got.Status.Conditions, afev1.RunCompletedCondition)
			Expect(c.Reason).To(Equal(afev1.AttemptsExhaustedReason))
			Expect(got.Status.Attempts).To(BeEquivalentTo(2))
			Expect(got.Status.Output).NotTo(ContainSubstring("executed"))
		})

		It("runs at most --max-runs-per-sandbox Runs in a sandbox at once, the others in creation order", func() {
			sbx := newSandbox(ns, "busy")
			sbx.Spec.Runtime = runtime
			Expect(k8sClient.Create(ctx, sbx)).To(Succeed())
			DeferCleanup(func() { deleteAndWaitGone(ctx, sbx) })
			waitReady(ctx, sbx)
			limit := config.DefaultMaxRunsPerSandbox
			var runs []*afev1.Run
			for i := 0; i < limit+2; i++ {
				run := newRun(ns, fmt.Sprintf("run-%02d", i), sbx.Name)
				run.Spec.Command = []string{"sleep", "4"}
				Expect(k8sClient.Create(ctx, run)).To(Succeed())
				runs = append(runs, run)
			}
			// While the first ones run, the last two wait with the reason.
			Eventually(func(g Gomega) {
				running := 0
				for _, r := range runs[:limit] {
					if getRun(ctx, r)(g).Status.Phase == afev1.RunRunning {
						running++
					}
				}
				g.Expect(running).To(Equal(limit))
				for _, r := range runs[limit:] {
					got := getRun(ctx, r)(g)
					g.Expect(got.Status.Phase).To(Equal(afev1.RunPending))
					g.Expect(meta.FindStatusCondition(got.Status.Conditions, afev1.RunCompletedCondition).Reason).To(Equal(afev1.RunLimitReachedReason))
				}
			}, "30s").Should(Succeed())
			var ended []*afev1.Run
			for _, r := range runs {
				ended = append(ended, waitRunPhase(ctx, r, afev1.RunCompleted))
			}
			// Never more than the limit at once, and the late ones started
			// once earlier ones had ended, first the first.
			for i, a := range ended {
				overlapping := 0
				for _, b := range ended {
					if !b.Status.StartTime.After(a.Status.StartTime.Time) && b.Status.CompletionTime.After(a.Status.StartTime.Time) {
						overlapping++
					}
				}
				Expect(overlapping).To(BeNumerically("<=", limit), "run %d started while %d ran", i, overlapping)
			}
			Expect(ended[limit].Status.StartTime.After(ended[0].Status.StartTime.Time)).To(BeTrue())
			// In creation order: a late Run that started before one created
			// earlier took a slot of its own, not the earlier one's (when
			// several slots came free at once, whichever is looked at first
			// starts first). Start times are in whole seconds.
			for i := limit; i < len(ended); i++ {
				for j := i + 1; j < len(ended); j++ {
					at := ended[j].Status.StartTime
					if !at.Before(ended[i].Status.StartTime) {
						continue
					}
					running := 0
					for _, b := range ended {
						if b.Status.StartTime.Before(at) && b.Status.CompletionTime.After(at.Time) {
							running++
						}
					}
					Expect(running+2).To(BeNumerically("<=", limit),
						"run %d started at %s while run %d, created before it, waited and %d ran", j, at, i, running)
				}
			}
		})
	})
})

var _ = Describe("Run steps", func() {
	forEachRuntime(func(runtime string) {
		It("execute the program the engine would, then kill what it left, in one exec", func() {
			engine, err := docker.New("")
			Expect(err).NotTo(HaveOccurred())
			ctx := context.Background()
			c, err := engine.RunContainer(ctx, docker.ContainerSpec{Name: "afe-test-step-" + rand.String(6), Image: dockertest.TestImage,
				Labels: map[string]string{"afe.test": "step"}, Network: "none", Command: []string{"sleep", "600"}, User: "1000:1000", Init: true,
				Runtime: runtime})
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(func() { _ = engine.RemoveContainer(ctx, c.ID) })
			const gid = 2_000_000_078
			step := func(cmd ...string) (int, string) {
				var out strings.Builder
				// A step whose daemons survive would hold the output open.
				ctx, cancel := context.WithTimeout(ctx, time.Minute)
				defer cancel()
				code, err := engine.Exec(ctx, c.ID, docker.ExecSpec{Cmd: runexec.StepCommand(gid, cmd), User: "1000:" + strconv.Itoa(gid),
					Stdout: &out, Stderr: &out})
				Expect(err).NotTo(HaveOccurred())
				return code, out.String()
			}

			By("passing the output and the exit code through")
			code, out := step("sh", "-c", "echo out; echo err >&2; exit 3")
			Expect(code).To(Equal(3))
			Expect(out).To(And(ContainSubstring("out\n"), ContainSubstring("err\n")))
			code, _ = step("true")
			Expect(code).To(BeZero())
			code, _ = step("sh", "-c", "kill -9 $$")
			Expect(code).To(Equal(137), "a command killed by a signal reports 128+N, as the engine does")

			By("refusing, as the engine would, what is no program: a missing path, a name not on PATH, a shell builtin")
			for _, cmd := range [][]string{{"/no/such/binary"}, {"no-such-program"}, {"exit", "0"}, {"/etc/passwd"}} {
				code, out = step(cmd...)
				Expect(code).To(Equal(127), "%v", cmd)
				Expect(out).To(HavePrefix(runexec.ExecFailedPrefix + cmd[0] + ": "))
			}

			By("adding nothing to the output while processes come and go under the kill's scan")
			churn := exec.Command("docker", "exec", "-u", "1000:1000", c.ID, "sh", "-c",
				"end=$(($(date +%s) + 20)); while [ $(date +%s) -lt $end ]; do sleep 0.01 & sleep 0.002; done")
			Expect(churn.Start()).To(Succeed())
			DeferCleanup(func() { _ = churn.Process.Kill(); _ = churn.Wait() })
			for range 30 {
				code, out = step("sh", "-c", "echo only")
				Expect(code).To(BeZero())
				Expect(out).To(Equal("only\n"))
			}

			By("ending at once a command whose daemons hold the output open, and leaving none of them")
			t0 := time.Now()
			code, out = step("sh", "-c", "sleep 600 & setsid sh -c 'sleep 700' & (sleep 800 >/dev/null 2>&1 </dev/null &); echo started")
			Expect(code).To(BeZero())
			Expect(out).To(Equal("started\n"))
			Expect(time.Since(t0)).To(BeNumerically("<", 30*time.Second))
			Expect(groupProcesses(c.ID, gid)).To(BeEmpty())
		})
	})
})
