package e2e

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/test/dockertest"
)

// envInt reads a positive integer setting of the churn.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// Crash convergence: tickets are created, paused, resumed, finished and
// deleted, with Runs, while the manager is killed with SIGKILL at random
// points and restarted. Seeded (CHURN_SEED) and sized by CHURN_TICKETS,
// CHURN_STEPS and CHURN_KILLS; `make test-chaos` runs a longer churn.
var _ = Describe("Crash convergence", func() {
	It("converges after a churn with SIGKILLs", func() {
		seed := int64(envInt("CHURN_SEED", 20261130))
		tickets, steps, kills := envInt("CHURN_TICKETS", 30), envInt("CHURN_STEPS", 90), envInt("CHURN_KILLS", 4)
		rng := rand.New(rand.NewSource(seed))
		GinkgoWriter.Printf("churn: seed %d, %d tickets, %d steps, %d kills\n", seed, tickets, steps, kills)

		own := ownControlPlane()
		defer func() { Expect(own.Stop()).To(Succeed()) }()
		scheme := runtime.NewScheme()
		Expect(afev1.AddToScheme(scheme)).To(Succeed())
		c, err := client.New(own.Config, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		ctx := context.Background()
		const ns = "default"
		inst := fmt.Sprintf("e2e-churn-%d", os.Getpid())
		defer dockertest.RemoveAll(afev1.LabelController + "=" + inst)

		// The engine's own record of what happened, to the nanosecond.
		recorder, err := dockertest.RecordEvents(afev1.LabelController + "=" + inst)
		Expect(err).NotTo(HaveOccurred())
		defer recorder.Stop()
		var mgr *gexec.Session
		start := func() {
			cmd := exec.Command(managerBin, "--instance", inst, "--metrics-bind-address", "0",
				"--health-probe-bind-address", "0", "--resync-period", "20s", "--max-concurrent-reconciles", "8")
			cmd.Env = append(os.Environ(), "KUBECONFIG="+own.Kubeconfig)
			mgr, err = gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
			Expect(err).NotTo(HaveOccurred())
		}
		start()
		defer func() { mgr.Kill(); Eventually(mgr).Should(gexec.Exit()) }()

		killAt := map[int]bool{}
		for len(killAt) < kills {
			killAt[rng.Intn(steps)] = true
		}
		state := map[string]afev1.TicketState{} // "" once deleted
		var runs []string
		for i := 0; i < tickets; i++ {
			name := fmt.Sprintf("churn-%02d", i)
			tk := &afev1.Ticket{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec: afev1.TicketSpec{Sandbox: afev1.SandboxTemplateSpec{
					Image: dockertest.TestImage,
					Resources: afev1.SandboxResources{
						CPU: ptr.To(resource.MustParse("100m")), Memory: ptr.To(resource.MustParse("32Mi")), Pids: 32,
					},
				}},
			}
			Expect(c.Create(ctx, tk)).To(Succeed())
			state[name] = afev1.TicketActive
		}
		setState := func(name string, s afev1.TicketState) {
			Eventually(func() error {
				tk := &afev1.Ticket{}
				if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, tk); err != nil {
					return err
				}
				tk.Spec.State = s
				return c.Update(ctx, tk)
			}).Should(Succeed())
			state[name] = s
		}
		crashes := 0
		for step := 0; step < steps; step++ {
			if killAt[step] {
				mgr.Kill() // SIGKILL
				Eventually(mgr).Should(gexec.Exit())
				crashes++
				start()
			}
			name := fmt.Sprintf("churn-%02d", rng.Intn(tickets))
			s := state[name]
			if s == "" || s.Terminal() {
				continue
			}
			switch op := rng.Intn(10); {
			case op < 4: // a Run
				run := &afev1.Run{
					ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-run-%d", name, step)},
					Spec: afev1.RunSpec{
						SandboxRef: afev1.SandboxReference{Name: name},
						Script:     fmt.Sprintf(`echo %d >> /workspace/log; sleep 0.%d; echo '{"step": %d}'`, step, rng.Intn(10), step),
					},
				}
				Expect(c.Create(ctx, run)).To(Succeed())
				runs = append(runs, run.Name)
			case op < 6:
				if s == afev1.TicketActive {
					setState(name, afev1.TicketPaused)
				} else {
					setState(name, afev1.TicketActive)
				}
			case op < 8:
				setState(name, []afev1.TicketState{afev1.TicketDone, afev1.TicketFailed, afev1.TicketCancelled}[rng.Intn(3)])
			default:
				Expect(c.Delete(ctx, &afev1.Ticket{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})).To(Succeed())
				state[name] = ""
			}
			time.Sleep(time.Duration(rng.Intn(150)) * time.Millisecond)
		}
		GinkgoWriter.Printf("churn: %d crashes injected, %d runs created\n", crashes, len(runs))

		By("converging: tickets as declared, Docker in agreement")
		checked := 0
		Eventually(func(g Gomega) {
			checked = 0
			for name, s := range state {
				objects, err := dockertest.Objects(afev1.LabelTicket + "=" + name + "," + afev1.LabelController + "=" + inst)
				g.Expect(err).NotTo(HaveOccurred())
				checked += len(objects) + 1
				tk := &afev1.Ticket{}
				err = c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, tk)
				switch {
				case s == "":
					g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%s was deleted", name)
					g.Expect(objects).To(BeEmpty(), name)
				case s.Terminal():
					g.Expect(err).NotTo(HaveOccurred())
					g.Expect(tk.Status.Phase).To(Equal(afev1.TicketFinished), name)
					g.Expect(objects).To(BeEmpty(), name)
				case s == afev1.TicketPaused && tk.Status.Sandboxes == 0:
					// Paused before its sandbox was made: kept as it is, empty.
					g.Expect(err).NotTo(HaveOccurred())
					g.Expect(tk.Status.Phase).To(Equal(afev1.TicketPausedPhase), name)
					g.Expect(objects).To(BeEmpty(), name)
				default:
					g.Expect(err).NotTo(HaveOccurred())
					if s == afev1.TicketActive {
						g.Expect(tk.Status.Phase).To(Equal(afev1.TicketReady), name)
					} else {
						g.Expect(tk.Status.Phase).To(Equal(afev1.TicketPausedPhase), name)
					}
					g.Expect(objects).To(ConsistOf("container/afe-"+ns+"."+name, "volume/afe-"+ns+"."+name+"_ws"), "%s is %s: %+v", name, s, tk.Status)
				}
			}
			sandboxes := &afev1.SandboxList{}
			g.Expect(c.List(ctx, sandboxes)).To(Succeed())
			live := map[string]bool{}
			made := map[string]bool{}
			for _, s := range sandboxes.Items {
				live[string(s.UID)] = true
				made[s.Name] = true
				g.Expect(state[s.Name]).NotTo(BeEmpty(), "sandbox %s of a deleted ticket", s.Name)
				g.Expect(state[s.Name].Terminal()).To(BeFalse(), "sandbox %s of a finished ticket", s.Name)
			}
			for _, kind := range []string{"container ls -a", "volume ls", "network ls"} {
				args := append(strings.Fields(kind), "--filter", "label="+afev1.LabelController+"="+inst, "--format", `{{.Label "afe.sandbox-uid"}}`)
				out, err := exec.Command("docker", args...).Output()
				g.Expect(err).NotTo(HaveOccurred())
				for _, uid := range strings.Fields(string(out)) {
					g.Expect(live[uid]).To(BeTrue(), "orphan %s of sandbox UID %s", kind, uid)
				}
			}
			// Nor a volume of these tickets' names without our labels (one
			// the engine would make for a mount whose volume was gone).
			out, err := exec.Command("docker", "volume", "ls", "--filter", "name=afe-"+ns+".churn-",
				"--format", `{{.Name}} {{.Label "afe.controller"}}`).Output()
			g.Expect(err).NotTo(HaveOccurred())
			for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				if name, ctl, _ := strings.Cut(line, " "); name != "" {
					g.Expect(ctl).To(Equal(inst), "volume %s is not labelled as ours", name)
				}
			}
			for _, name := range runs {
				run := &afev1.Run{}
				g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, run)).To(Succeed(), "run %s is lost", name)
				if sbx := run.Spec.SandboxRef.Name; state[sbx] == afev1.TicketPaused && !made[sbx] {
					// Its ticket was paused before the sandbox was made: the
					// Run waits for it.
					g.Expect(run.Status.Phase).To(Equal(afev1.RunPending), "run %s", name)
					continue
				}
				g.Expect(run.Status.Phase.Terminal()).To(BeTrue(), "run %s is %s", name, run.Status.Phase)
			}
		}, "180s", "1s").Should(Succeed())

		By("executing no Run after its ticket finished, as the engine saw it")
		// Of a finished or deleted ticket, the engine's last act on its
		// sandbox container is its removal: nothing was created, started or
		// executed in one after it. Events that only report (a process
		// list, an exec or the container dying) may be logged after the
		// removal they raced with, and are not acts. The times are the
		// engine's, to the nanosecond; the Ticket's finishedTime (to the
		// second) comes after.
		events := recorder.Stop()
		last := map[string]dockertest.Event{} // ticket: its last act on a sandbox container
		for _, e := range events {
			if e.Labels[afev1.LabelRole] == afev1.RoleSandbox && dockertest.Acts(e) {
				last[e.Labels[afev1.LabelTicket]] = e
			}
		}
		execs := 0
		for _, e := range events {
			if strings.HasPrefix(e.Action, "exec_start") {
				execs++
			}
		}
		Expect(execs).To(BeNumerically(">", 0), "the recorder saw the Runs' execs")
		for name, s := range state {
			if s != "" && !s.Terminal() {
				continue
			}
			e, seen := last[name]
			if !seen {
				continue // finished before its sandbox was made
			}
			Expect(e.Action).To(Equal("destroy"), "ticket %s: the engine's last act on its sandbox is %q at %s", name, e.Action, e.Time)
			tk := &afev1.Ticket{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, tk); err == nil && tk.Status.FinishedTime != nil {
				Expect(e.Time).To(BeTemporally("<", tk.Status.FinishedTime.Add(time.Second)), "ticket %s: removed after its finishedTime", name)
			}
		}
		for _, name := range runs {
			run := &afev1.Run{}
			Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, run)).To(Succeed())
			if run.Status.Phase != afev1.RunFailed {
				continue
			}
			reason := meta.FindStatusCondition(run.Status.Conditions, afev1.RunCompletedCondition).Reason
			if reason == afev1.AttemptsExhaustedReason {
				// Cut short by as many crashes as it may be started (the
				// kills can fall a second apart).
				Expect(run.Status.Attempts).To(BeEquivalentTo(afev1.DefaultRunMaxAttempts), "run %s", name)
				Expect(crashes).To(BeNumerically(">=", afev1.DefaultRunMaxAttempts), "run %s exhausted its attempts with fewer crashes", name)
				continue
			}
			Expect(reason).To(BeElementOf(afev1.SandboxDeletedReason, afev1.TicketFinishedReason), "run %s: %+v", name, run.Status)
		}
		GinkgoWriter.Printf("churn: converged; %d tickets and Docker objects checked, nothing lost or leaked\n", checked)
	})
})
