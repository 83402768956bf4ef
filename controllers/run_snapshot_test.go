package controllers

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/naming"
	"afe.dev/sandbox/test/dockertest"
)

func newSnapshotRun(ns, name, sandbox string) *afev1.Run {
	run := newRun(ns, name, sandbox)
	run.Spec.Builtin = afev1.BuiltinSnapshot
	return run
}

// takeSnapshot runs a Snapshot Run to completion and returns the volume.
func takeSnapshot(ctx context.Context, ns, name, sandbox string) (string, *afev1.Run) {
	run := newSnapshotRun(ns, name, sandbox)
	Expect(k8sClient.Create(ctx, run)).To(Succeed())
	got := waitRunPhase(ctx, run, afev1.RunCompleted)
	Expect(got.Status.OK).To(HaveValue(BeTrue()), got.Status.Output)
	res := result(got)
	Expect(res).To(HaveKey("snapshot"))
	return res["snapshot"].(string), got
}

// volumeExists tells whether the engine has the volume, with the docker CLI.
func volumeExists(name string) bool {
	objects, err := dockertest.Objects(afev1.LabelController + "=" + instance)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	for _, o := range objects {
		if o == "volume/"+name {
			return true
		}
	}
	return false
}

var _ = Describe("Builtin Snapshot", func() {
	var ctx context.Context
	var ns string
	BeforeEach(func() {
		ctx = context.Background()
		ns = newNamespace(ctx)
	})

	// The copy reads the volumes on the engine's side, with helpers under
	// the engine's default runtime that are never started: the sandboxes'
	// runtime must not matter, a runsc sandbox's workspace (written through
	// gVisor's file proxy) included.
	forEachRuntime(func(runtime string) {
		It("copies the workspace into a new volume a new sandbox can start from", func() {
			src := newSandbox(ns, "src")
			src.Spec.Runtime = runtime
			Expect(k8sClient.Create(ctx, src)).To(Succeed())
			src = waitReady(ctx, src)
			defer deleteAndWaitGone(ctx, src)
			c := src.Status.ContainerName
			inContainer(c, `mkdir -p /workspace/d && echo old > /workspace/d/f && head -c 52428800 /dev/urandom > /workspace/big && chmod 640 /workspace/d/f`)
			// The copy helpers are created and never started: nothing of the
			// workload's image runs beside its two volumes.
			helpers, err := dockertest.RecordEvents(afev1.LabelRole + "=" + afev1.RoleSnapshotCopy)
			Expect(err).NotTo(HaveOccurred())
			defer func() {
				var actions []string
				for _, e := range helpers.Stop() {
					if e.Labels[afev1.LabelNamespace] == ns {
						actions = append(actions, e.Action)
					}
				}
				Expect(actions).To(ContainElement("create"), "the recorder saw the copy helpers")
				Expect(actions).NotTo(ContainElement("start"), "a copy helper was started")
			}()

			name, run := takeSnapshot(ctx, ns, "snap", src.Name)
			key := naming.Key(ns, src.Name)
			Expect(name).To(Equal(naming.Snapshot(key, 1)))
			GinkgoWriter.Printf("Snapshot of a 50 MiB workspace: %dms\n", run.Status.DurationMilliseconds)
			Eventually(func(g Gomega) []afev1.SandboxSnapshot {
				return getSandbox(ctx, src)(g).Status.Snapshots
			}).Should(ConsistOf(HaveField("Name", name)))
			Expect(getSandbox(ctx, src)(Default).Status.Snapshots[0].Run).To(Equal("snap"))
			labels := volumeLabels(name)
			Expect(labels).To(HaveKeyWithValue(afev1.LabelRole, afev1.RoleSnapshot))
			Expect(labels).To(HaveKeyWithValue(afev1.LabelSandboxUID, string(src.UID)))
			Expect(labels).To(HaveKeyWithValue(afev1.LabelRun, "snap"))
			Expect(dockertest.Objects(afev1.LabelRole+"="+afev1.RoleSnapshotCopy+","+afev1.LabelNamespace+"="+ns)).To(BeEmpty(), "no copy helper is left")

			By("executing it again after a crash: the same snapshot, made again")
			reexecute(ctx, run, src)
			again := waitRunPhase(ctx, run, afev1.RunCompleted)
			Expect(result(again)).To(HaveKeyWithValue("snapshot", name))

			By("changing the workspace, and taking a second snapshot")
			inContainer(c, `echo new > /workspace/d/f && rm /workspace/big`)
			second, _ := takeSnapshot(ctx, ns, "snap2", src.Name)
			Expect(second).To(Equal(naming.Snapshot(key, 2)))

			By("starting a new sandbox from the first snapshot")
			dst := newSandbox(ns, "dst")
			dst.Spec.Runtime = runtime
			dst.Spec.Workspace.FromSnapshot = name
			t0 := time.Now()
			Expect(k8sClient.Create(ctx, dst)).To(Succeed())
			dst = waitReady(ctx, dst)
			GinkgoWriter.Printf("Sandbox from a 50 MiB snapshot, creation to Ready: %s\n", time.Since(t0))
			defer deleteAndWaitGone(ctx, dst)
			// Each has an id of its own: the source's files are the new one's.
			srcUser, _ := containerUser(src.Status.ContainerName)
			dstUser, _ := containerUser(dst.Status.ContainerName)
			Expect(dstUser).NotTo(Equal(srcUser))
			uid, _, _ := strings.Cut(dstUser, ":")
			Expect(inContainer(dst.Status.ContainerName, `cat /workspace/d/f; stat -c '%u %a' /workspace/d/f /workspace; wc -c < /workspace/big; touch /workspace/writable`)).
				To(Equal("old\n" + uid + " 640\n" + uid + " 755\n52428800"))
			Expect(findCondition(dst.Status.Conditions, afev1.WorkspaceReadyCondition).Message).To(ContainSubstring("made from snapshot " + name))

			By("recreating it from the snapshot when its container is lost")
			inContainer(dst.Status.ContainerName, `echo lost-soon > /workspace/d/f`)
			Expect(dockertest.RemoveContainer(dst.Status.ContainerName)).To(Succeed())
			Eventually(func(g Gomega) {
				cur := getSandbox(ctx, dst)(g)
				g.Expect(cur.Status.Recreations).To(Equal(int32(1)))
				g.Expect(cur.Status.Phase).To(Equal(afev1.SandboxReady))
			}).Should(Succeed())
			Expect(inContainer(dst.Status.ContainerName, `cat /workspace/d/f`)).To(Equal("old"))

			By("removing the snapshots of a sandbox without ticket once it is deleted")
			deleteAndWaitGone(ctx, src)
			Expect(volumeExists(name) || volumeExists(second)).To(BeFalse(), "removed with the Sandbox, not later by the sweep")
			Expect(getSandbox(ctx, dst)(Default).Status.Phase).To(Equal(afev1.SandboxReady), "a sandbox made from it keeps its copy")
		})
	})

	It("leaves no partial snapshot volume when the copy times out, and replaces the helpers a crash left", func() {
		// The Run takes the sandbox's timeout, 3 s for the first attempt;
		// the second, which copies one small file, is given two minutes:
		// under load, the helpers of a copy alone took over 4 s to make.
		src := newSandbox(ns, "src")
		src.Spec.TimeoutSeconds = 3
		Expect(k8sClient.Create(ctx, src)).To(Succeed())
		src = waitReady(ctx, src)
		defer deleteAndWaitGone(ctx, src)
		// Sparse files (each within the file size limit) are read out as
		// 16 GB of zeros: the copy cannot end within the attempt's 3 s.
		inContainer(src.Status.ContainerName, `for i in $(seq 16); do truncate -s 1000M /workspace/big$i; done`)
		helpers, err := dockertest.RecordEvents(afev1.LabelNamespace + "=" + ns)
		Expect(err).NotTo(HaveOccurred())
		partial := afev1.LabelRole + "=" + afev1.RoleSnapshot + "," + afev1.LabelNamespace + "=" + ns
		copies := afev1.LabelRole + "=" + afev1.RoleSnapshotCopy + "," + afev1.LabelNamespace + "=" + ns

		run := newSnapshotRun(ns, "slow", src.Name)
		run.Spec.MaxAttempts = ptr.To(int32(2))
		Expect(k8sClient.Create(ctx, run)).To(Succeed())
		Eventually(func(g Gomega) []string {
			objects, err := dockertest.Objects(partial)
			g.Expect(err).NotTo(HaveOccurred())
			return objects
		}).WithTimeout(3*time.Second).WithPolling(100*time.Millisecond).ShouldNot(BeEmpty(), "the snapshot volume is being written")
		got := waitRunPhase(ctx, run, afev1.RunTimedOut)
		Expect(got.Status.TimedOut).To(HaveValue(BeTrue()), got.Status.Output)
		Expect(dockertest.Objects(partial)).To(BeEmpty(), "the partial snapshot volume is removed")
		Expect(dockertest.Objects(copies)).To(BeEmpty(), "the copy helpers are removed")

		By("executing it again after a crash that left its helpers behind")
		var planted []string
		for _, e := range helpers.Stop() {
			if e.Action != "create" || e.Labels[afev1.LabelRole] != afev1.RoleSnapshotCopy {
				continue
			}
			args := []string{"create", "--name", e.Labels["name"], "--network", "none"}
			for k, v := range e.Labels {
				if strings.HasPrefix(k, "afe.") {
					args = append(args, "--label", k+"="+v)
				}
			}
			out, err := exec.Command("docker", append(args, dockertest.TestImage, "/afe-never-started")...).CombinedOutput()
			Expect(err).NotTo(HaveOccurred(), string(out))
			planted = append(planted, strings.TrimSpace(string(out)))
		}
		Expect(planted).To(HaveLen(2), "the two helpers of the copy, as a crash leaves them")
		inContainer(src.Status.ContainerName, `rm /workspace/big* && echo small > /workspace/f`)
		longer := getSandbox(ctx, src)(Default)
		patch := client.MergeFrom(longer.DeepCopy())
		longer.Spec.TimeoutSeconds = 120
		Expect(k8sClient.Patch(ctx, longer, patch)).To(Succeed())
		// Seen by the Sandbox reconciler, so in the manager's cache, which
		// the Run reconciler reads too.
		Eventually(func(g Gomega) int64 { return getSandbox(ctx, src)(g).Status.ObservedGeneration }).
			Should(Equal(longer.Generation))
		reexecute(ctx, got, src)
		again := waitRunPhase(ctx, run, afev1.RunCompleted)
		Expect(again.Status.OK).To(HaveValue(BeTrue()), again.Status.Output)
		Expect(dockertest.Objects(copies)).To(BeEmpty(), "the helpers a crash left are replaced, then removed")
		for _, id := range planted {
			Expect(exec.Command("docker", "inspect", id).Run()).To(HaveOccurred(), "planted helper %s is gone", id)
		}
		Expect(dockertest.Objects(partial)).To(ConsistOf("volume/" + result(again)["snapshot"].(string)))
	})

	It("refuses a missing snapshot, another namespace's or instance's, or a live workspace, and creates nothing", func() {
		other := newNamespace(ctx)
		src := newSandbox(other, "elsewhere")
		Expect(k8sClient.Create(ctx, src)).To(Succeed())
		src = waitReady(ctx, src)
		defer deleteAndWaitGone(ctx, src)
		foreign, _ := takeSnapshot(ctx, other, "snap", src.Name)
		// A neighbour of the same namespace: its live workspace is no
		// snapshot, whatever its name.
		live := newSandbox(ns, "live")
		Expect(k8sClient.Create(ctx, live)).To(Succeed())
		live = waitReady(ctx, live)
		defer deleteAndWaitGone(ctx, live)
		// A volume named and labelled as a snapshot of this namespace, but
		// of another controller instance.
		otherInstance := "afe-" + ns + ".gone_snap-1"
		out, err := exec.Command("docker", "volume", "create", "--label", afev1.LabelController+"=other-"+instance,
			"--label", afev1.LabelNamespace+"="+ns, "--label", afev1.LabelRole+"="+afev1.RoleSnapshot,
			"--label", afev1.LabelSandboxUID+"=gone", otherInstance).CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
		defer dockertest.RemoveAll(afev1.LabelController + "=other-" + instance)

		for name, from := range map[string]string{
			"from-missing": "afe-" + ns + ".nothing_snap-1", "from-foreign": foreign, "from-other-instance": otherInstance,
		} {
			sbx := newSandbox(ns, name)
			sbx.Spec.Workspace.FromSnapshot = from
			Expect(k8sClient.Create(ctx, sbx)).To(Succeed())
			waitCondition(ctx, sbx, afev1.WorkspaceReadyCondition, "False", afev1.SnapshotNotFoundReason)
			Eventually(func(g Gomega) afev1.SandboxPhase { return getSandbox(ctx, sbx)(g).Status.Phase }).Should(Equal(afev1.SandboxFailed))
			Expect(dockertest.Objects(uidLabel(sbx))).To(BeEmpty())
			deleteAndWaitGone(ctx, sbx)
		}

		By("refusing a live workspace volume's name at admission")
		fromLive := newSandbox(ns, "from-live")
		fromLive.Spec.Workspace.FromSnapshot = live.Status.VolumeName
		Expect(k8sClient.Create(ctx, fromLive)).To(MatchError(ContainSubstring("spec.workspace.fromSnapshot")))

		By("refusing fromSnapshot on a Folder workspace at admission")
		bad := newSandbox(ns, "folder")
		bad.Spec.Workspace = afev1.WorkspaceSpec{Type: afev1.WorkspaceFolder, HostPath: workspaceRoot + "/x", FromSnapshot: foreign}
		Expect(k8sClient.Create(ctx, bad)).To(MatchError(ContainSubstring("fromSnapshot is only for a Volume workspace")))
	})

	It("removes a ticket's snapshots when it finishes, unless it retains them", func() {
		dropped := newTicket(ns, "dropped")
		kept := newTicket(ns, "kept")
		kept.Spec.RetainSnapshots = true
		var snaps []string
		for _, tk := range []*afev1.Ticket{dropped, kept} {
			Expect(k8sClient.Create(ctx, tk)).To(Succeed())
			waitTicketPhase(ctx, tk, afev1.TicketReady)
			sbx := getSandbox(ctx, &afev1.Sandbox{ObjectMeta: tk.ObjectMeta})(Default)
			inContainer(sbx.Status.ContainerName, `echo "work of $1" > /workspace/notes`, tk.Name)
			name, _ := takeSnapshot(ctx, ns, tk.Name+"-snap", tk.Name)
			Expect(volumeLabels(name)).To(HaveKeyWithValue(afev1.LabelTicketUID, string(getTicket(ctx, tk)(Default).UID)))
			snaps = append(snaps, name)
			if tk == dropped {
				By("keeping an active ticket's snapshot when its sandbox is deleted and made again")
				Expect(k8sClient.Delete(ctx, sbx)).To(Succeed())
				Eventually(func(g Gomega) {
					again := getSandbox(ctx, sbx)(g)
					g.Expect(again.UID).NotTo(Equal(sbx.UID), "the ticket made it again")
					g.Expect(again.Status.Phase).To(Equal(afev1.SandboxReady))
				}).Should(Succeed())
				Consistently(func() bool { return volumeExists(name) }, "3s").Should(BeTrue(), "the sweep (every 2 s) leaves it")
			}
			setState(ctx, tk, afev1.TicketDone)
		}
		waitTicketPhase(ctx, dropped, afev1.TicketFinished)
		done := waitTicketPhase(ctx, kept, afev1.TicketFinished)
		Expect(volumeExists(snaps[0])).To(BeFalse(), "a finished ticket's snapshot is removed")
		Expect(volumeExists(snaps[1])).To(BeTrue(), "a retained snapshot is kept")
		Expect(done.Status.RetainedSnapshots).To(Equal([]string{snaps[1]}))
		Consistently(func() bool { return volumeExists(snaps[1]) }, "3s").Should(BeTrue(), "the sweep keeps it too")

		By("starting a new ticket's sandbox from the retained snapshot")
		next := newTicket(ns, "next")
		next.Spec.Sandbox.Workspace.FromSnapshot = snaps[1]
		Expect(k8sClient.Create(ctx, next)).To(Succeed())
		waitTicketPhase(ctx, next, afev1.TicketReady)
		sbx := getSandbox(ctx, &afev1.Sandbox{ObjectMeta: next.ObjectMeta})(Default)
		Expect(inContainer(sbx.Status.ContainerName, `cat /workspace/notes`)).To(Equal("work of kept"))
		setState(ctx, next, afev1.TicketCancelled)
		waitTicketPhase(ctx, next, afev1.TicketFinished)

		By("removing the retained snapshot with its ticket")
		Expect(k8sClient.Delete(ctx, kept)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(kept), &afev1.Ticket{}))
		}).Should(BeTrue())
		Eventually(func() bool { return volumeExists(snaps[1]) }).Should(BeFalse())
	})

	It("removes a finished ticket's retained snapshot once retainSnapshots goes back to false", func() {
		tk := newTicket(ns, "flipped")
		tk.Spec.RetainSnapshots = true
		Expect(k8sClient.Create(ctx, tk)).To(Succeed())
		waitTicketPhase(ctx, tk, afev1.TicketReady)
		name, _ := takeSnapshot(ctx, ns, "flipped-snap", tk.Name)
		setState(ctx, tk, afev1.TicketDone)
		waitTicketPhase(ctx, tk, afev1.TicketFinished)
		Consistently(func() bool { return volumeExists(name) }, "3s").Should(BeTrue(), "retained through sweeps (every 2 s)")
		Eventually(func(g Gomega) {
			cur := getTicket(ctx, tk)(g)
			cur.Spec.RetainSnapshots = false
			g.Expect(k8sClient.Update(ctx, cur)).To(Succeed())
		}).Should(Succeed())
		Eventually(func() bool { return volumeExists(name) }).Should(BeFalse(), "removed by the next sweep")
		Expect(k8sClient.Delete(ctx, tk)).To(Succeed())
	})
})

// volumeLabels reads a volume's labels with the docker CLI.
func volumeLabels(name string) map[string]string {
	out, err := exec.Command("docker", "volume", "inspect", "-f", "{{json .Labels}}", name).Output()
	Expect(err).NotTo(HaveOccurred(), string(out))
	labels := map[string]string{}
	Expect(json.Unmarshal(out, &labels)).To(Succeed())
	return labels
}
