package controllers

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/test/dockertest"
)

func newTicket(ns, name string, scopes ...string) *afev1.Ticket {
	return &afev1.Ticket{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: afev1.TicketSpec{Scopes: scopes, Sandbox: afev1.SandboxTemplateSpec{
			Image:     dockertest.TestImage,
			Resources: afev1.SandboxResources{CPU: ptr.To(resource.MustParse("250m")), Memory: ptr.To(resource.MustParse("64Mi")), Pids: 64},
		}},
	}
}

func getTicket(ctx context.Context, tk *afev1.Ticket) func(Gomega) *afev1.Ticket {
	return func(g Gomega) *afev1.Ticket {
		got := &afev1.Ticket{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(tk), got)).To(Succeed())
		return got
	}
}

func waitTicketPhase(ctx context.Context, tk *afev1.Ticket, phase afev1.TicketPhase) *afev1.Ticket {
	var got *afev1.Ticket
	Eventually(func(g Gomega) {
		got = getTicket(ctx, tk)(g)
		g.Expect(got.Status.Phase).To(Equal(phase), "status %+v", got.Status)
	}).Should(Succeed())
	return got
}

func setState(ctx context.Context, tk *afev1.Ticket, state afev1.TicketState) {
	Eventually(func(g Gomega) {
		cur := getTicket(ctx, tk)(g)
		cur.Spec.State = state
		g.Expect(k8sClient.Update(ctx, cur)).To(Succeed())
	}).Should(Succeed())
}

func containerOf(ctx context.Context, ns, name string) *dockertest.Inspected {
	sbx := getSandbox(ctx, &afev1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})(Default)
	c, err := dockertest.Inspect(sbx.Status.ContainerName)
	Expect(err).NotTo(HaveOccurred())
	return c
}

var _ = Describe("Ticket", func() {
	var ctx context.Context
	var ns string
	BeforeEach(func() {
		ctx = context.Background()
		ns = newNamespace(ctx)
	})

	It("gives a Volume workspace one sandbox for all scopes, survives losses with requeues, pauses, and leaves nothing when Done", func() {
		tk := newTicket(ns, "tk", "a", "b")
		Expect(k8sClient.Create(ctx, tk)).To(Succeed())
		got := waitTicketPhase(ctx, tk, afev1.TicketReady)
		Expect(got.Status.Ready).To(Equal("1/1"))
		Expect(got.Spec.State).To(Equal(afev1.TicketActive))
		Expect(meta.FindStatusCondition(got.Status.Conditions, afev1.TicketRequeuedCondition).Status).To(Equal(metav1.ConditionFalse))
		list := &afev1.SandboxList{}
		Expect(k8sClient.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		Expect(list.Items).To(HaveLen(1))
		Expect(list.Items[0].Name).To(Equal("tk"))
		Expect(list.Items[0].Spec.TicketRef.Name).To(Equal("tk"))
		Expect(metav1.GetControllerOf(&list.Items[0]).UID).To(Equal(got.UID))
		Expect(dockertest.Objects(afev1.LabelTicket + "=tk," + afev1.LabelNamespace + "=" + ns)).To(ConsistOf("container/afe-"+ns+".tk", "volume/afe-"+ns+".tk_ws"))

		By("recreating a removed container with a fresh workspace and a requeue")
		first := containerOf(ctx, ns, "tk")
		_, err := dockertest.Exec(first.Name, "sh", "-c", "echo old > /workspace/note")
		Expect(err).NotTo(HaveOccurred())
		lost := time.Now()
		Expect(dockertest.RemoveContainer(first.Name)).To(Succeed())
		Eventually(func(g Gomega) {
			c, err := dockertest.Inspect(first.Name)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(c.ID).NotTo(Equal(first.ID))
			g.Expect(c.State.Running).To(BeTrue())
		}).WithPolling(20 * time.Millisecond).Should(Succeed())
		GinkgoWriter.Printf("docker rm -f: replacement running after %s\n", time.Since(lost))
		Eventually(func(g Gomega) {
			cur := getTicket(ctx, tk)(g)
			g.Expect(cur.Status.Requeues).To(Equal(int32(1)))
			g.Expect(cur.Status.LastRequeueReason).To(Equal("SandboxLost"))
			g.Expect(cur.Status.LastRequeueTime).NotTo(BeNil())
			g.Expect(meta.IsStatusConditionTrue(cur.Status.Conditions, afev1.TicketRequeuedCondition)).To(BeTrue())
			g.Expect(cur.Status.Phase).To(Equal(afev1.TicketReady))
		}).Should(Succeed())
		out, _ := dockertest.Exec(first.Name, "ls", "-A", "/workspace")
		Expect(out).To(BeEmpty(), "the workspace is fresh")
		Eventually(func() []string { return eventReasons(ctx, ns, got) }).Should(ContainElement("SandboxLost"))

		By("recreating a stopped container the same way")
		second := containerOf(ctx, ns, "tk")
		stopped := time.Now()
		Expect(exec.Command("docker", "stop", "-t", "1", second.Name).Run()).To(Succeed())
		Eventually(func(g Gomega) {
			c, err := dockertest.Inspect(second.Name)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(c.ID).NotTo(Equal(second.ID))
			g.Expect(c.State.Running).To(BeTrue())
		}).WithPolling(20 * time.Millisecond).Should(Succeed())
		GinkgoWriter.Printf("docker stop: replacement running after %s (stop itself included)\n", time.Since(stopped))
		Eventually(func(g Gomega) int32 { return getTicket(ctx, tk)(g).Status.Requeues }).Should(Equal(int32(2)))

		By("pausing: the container is kept")
		third := containerOf(ctx, ns, "tk")
		setState(ctx, tk, afev1.TicketPaused)
		waitTicketPhase(ctx, tk, afev1.TicketPausedPhase)
		Consistently(func() string { return containerOf(ctx, ns, "tk").ID }, "2s").Should(Equal(third.ID))
		setState(ctx, tk, afev1.TicketActive)
		waitTicketPhase(ctx, tk, afev1.TicketReady)
		Expect(containerOf(ctx, ns, "tk").ID).To(Equal(third.ID))

		By("finishing: every Sandbox and labelled object goes")
		done := time.Now()
		setState(ctx, tk, afev1.TicketDone)
		got = waitTicketPhase(ctx, tk, afev1.TicketFinished)
		GinkgoWriter.Printf("Done to Finished: %s\n", time.Since(done))
		Expect(meta.IsStatusConditionTrue(got.Status.Conditions, afev1.TicketCleanedUpCondition)).To(BeTrue())
		Expect(got.Status.FinishedTime).NotTo(BeNil())
		Expect(dockertest.Objects(afev1.LabelTicket + "=tk," + afev1.LabelNamespace + "=" + ns)).To(BeEmpty())
		Expect(k8sClient.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		Expect(list.Items).To(BeEmpty())

		By("refusing to leave a terminal state")
		reopened := got.DeepCopy()
		reopened.Spec.State = afev1.TicketActive
		Expect(k8sClient.Patch(ctx, reopened, client.MergeFrom(got))).To(MatchError(ContainSubstring("cannot change state")))
		Expect(k8sClient.Delete(ctx, got)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(tk), &afev1.Ticket{}))
		}).Should(BeTrue())
	})

	It("gives a Folder workspace one sandbox per scope on the same folder", func() {
		dir := filepath.Join(workspaceRoot, ns, "tk")
		Expect(os.MkdirAll(dir, 0o777)).To(Succeed())
		Expect(os.Chmod(dir, 0o777)).To(Succeed())
		tk := newTicket(ns, "folder", "a", "b")
		tk.Spec.Sandbox.Workspace = afev1.WorkspaceSpec{Type: afev1.WorkspaceFolder, HostPath: dir}
		Expect(k8sClient.Create(ctx, tk)).To(Succeed())
		got := waitTicketPhase(ctx, tk, afev1.TicketReady)
		Expect(got.Status.Ready).To(Equal("2/2"))
		a, b := containerOf(ctx, ns, "folder-a"), containerOf(ctx, ns, "folder-b")
		Expect(a.Config.Labels).To(HaveKeyWithValue(afev1.LabelScope, "a"))
		Expect(b.Config.Labels).To(HaveKeyWithValue(afev1.LabelScope, "b"))
		Expect(a.Config.Labels).To(HaveKeyWithValue(afev1.LabelTicket, "folder"))
		_, err := dockertest.Exec(a.Name, "sh", "-c", "echo from-a > /workspace/shared")
		Expect(err).NotTo(HaveOccurred())
		Expect(dockertest.Exec(b.Name, "cat", "/workspace/shared")).To(Equal("from-a"))

		By("deleting the Active ticket: everything goes but the host folder")
		Expect(k8sClient.Delete(ctx, tk)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(tk), &afev1.Ticket{}))
		}).Should(BeTrue())
		Expect(dockertest.Objects(afev1.LabelTicket + "=folder," + afev1.LabelNamespace + "=" + ns)).To(BeEmpty())
		Expect(filepath.Join(dir, "shared")).To(BeAnExistingFile())
		Eventually(func() []string { return eventReasons(ctx, ns, got) }).Should(ContainElement(afev1.CleanedUpReason))
	})

	It("ends the Runs of a ticket that finishes before they could execute", func() {
		tk := newTicket(ns, "never", "main")
		tk.Spec.State = afev1.TicketPaused // paused from the start: no sandbox is made
		Expect(k8sClient.Create(ctx, tk)).To(Succeed())
		waitTicketPhase(ctx, tk, afev1.TicketPausedPhase)
		run := newRun(ns, "waiting", "never")
		run.Spec.Command = []string{"true"}
		Expect(k8sClient.Create(ctx, run)).To(Succeed())
		waitRunPhase(ctx, run, afev1.RunPending)
		setState(ctx, tk, afev1.TicketCancelled)
		got := waitRunPhase(ctx, run, afev1.RunFailed)
		Expect(findCondition(got.Status.Conditions, afev1.RunCompletedCondition).Reason).To(Equal(afev1.TicketFinishedReason))
		Expect(got.Status.Attempts).To(BeZero())
		waitTicketPhase(ctx, tk, afev1.TicketFinished)
	})

	It("sweeps planted orphans", func() {
		labels := []string{
			"--label", afev1.LabelController + "=" + instance,
			"--label", afev1.LabelSandboxUID + "=no-such-sandbox",
			"--label", afev1.LabelNamespace + "=" + ns,
			"--label", afev1.LabelSandbox + "=ghost",
		}
		name := "afe-" + ns + ".ghost"
		Expect(exec.Command("docker", append(append([]string{"volume", "create"}, labels...), name+"_ws")...).Run()).To(Succeed())
		Expect(exec.Command("docker", append(append([]string{"run", "-d", "--network", "none", "--name", name}, labels...), dockertest.TestImage, "sleep", "600")...).Run()).To(Succeed())
		// Both were made (the commands succeeded); the sweep, every 2 s, may
		// already have taken one, so they are looked up by name until gone.
		gone := func(args ...string) bool { return exec.Command("docker", args...).Run() != nil }
		Eventually(func() bool {
			return gone("container", "inspect", name) && gone("volume", "inspect", name+"_ws")
		}, "30s").Should(BeTrue())
		Expect(dockertest.Objects(afev1.LabelSandboxUID + "=no-such-sandbox")).To(BeEmpty())
	})

	It("neither adopts nor sweeps what belongs to another instance", func() {
		name := "afe-" + ns + ".taken"
		other := "other-" + instance
		defer dockertest.RemoveAll(afev1.LabelController + "=" + other)
		Expect(exec.Command("docker", "run", "-d", "--network", "none", "--name", name,
			"--label", afev1.LabelController+"="+other, "--label", afev1.LabelSandboxUID+"=foreign",
			"--label", afev1.LabelNamespace+"="+ns, "--label", afev1.LabelSandbox+"=taken",
			dockertest.TestImage, "sleep", "600").Run()).To(Succeed())
		planted, err := dockertest.Inspect(name)
		Expect(err).NotTo(HaveOccurred())

		sbx := newSandbox(ns, "taken")
		Expect(k8sClient.Create(ctx, sbx)).To(Succeed())
		c := waitCondition(ctx, sbx, afev1.ContainerReadyCondition, metav1.ConditionFalse, afev1.NameConflictReason)
		Expect(c.Message).To(ContainSubstring("not adopted"))
		// Through a few sweeps (every 2 s) and the Sandbox's deletion, the
		// other instance's container stays as it was.
		Consistently(func(g Gomega) {
			now, err := dockertest.Inspect(name)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(now.ID).To(Equal(planted.ID))
			g.Expect(now.State.Running).To(BeTrue())
		}, "5s", "500ms").Should(Succeed())
		own := uidLabel(sbx)
		Expect(dockertest.Objects(own)).To(ConsistOf("volume/" + name + "_ws"))
		deleteAndWaitGone(ctx, sbx)
		now, err := dockertest.Inspect(name)
		Expect(err).NotTo(HaveOccurred())
		Expect(now.ID).To(Equal(planted.ID))
		Expect(dockertest.Objects(own)).To(BeEmpty(), "its own workspace volume went")
	})
})
