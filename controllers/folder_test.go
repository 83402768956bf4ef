package controllers

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/test/dockertest"
)

// swapLoop is issue 12's attack, run by a sandbox on folder a: it swaps
// a/sub for a link to the host's root and back, over and over, so that a
// sandbox on a/sub whose path the engine binds at the wrong moment would
// get the host's root as its /workspace.
const swapLoop = `cd /workspace && mkdir -p sub && while :; do mv sub sub.d && ln -s / sub && sleep 0.03; rm -f sub; mv sub.d sub; sleep 0.03; done`

// folderSandbox is a Sandbox on a host folder; ticket "" means none (the
// Sandbox is its own ticket).
func folderSandbox(ns, name, dir, ticket string) *afev1.Sandbox {
	sbx := newSandbox(ns, name)
	sbx.Spec.Workspace = afev1.WorkspaceSpec{Type: afev1.WorkspaceFolder, HostPath: dir}
	if ticket != "" {
		sbx.Spec.TicketRef = &afev1.TicketReference{Name: ticket}
	}
	return sbx
}

// restoreAfterLoop puts dir back as it was before the swap loop, should the
// loop have died (with its sandbox's container) in the middle of a swap:
// with the link in place, or between the rename and the link.
func restoreAfterLoop(dir string) {
	if fi, err := os.Lstat(dir); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		ExpectWithOffset(1, os.Remove(dir)).To(Succeed())
	}
	if _, err := os.Lstat(dir); os.IsNotExist(err) {
		ExpectWithOffset(1, os.Rename(dir+".d", dir)).To(Succeed())
	}
}

// attacker is a folderSandbox running the swap loop.
func attacker(ns, name, dir, ticket string) *afev1.Sandbox {
	sbx := folderSandbox(ns, name, dir, ticket)
	sbx.Spec.Command = []string{"/bin/sh", "-c", swapLoop}
	return sbx
}

// mkdirs makes folders the sandbox user (uid 1000) can write.
func mkdirs(dirs ...string) {
	for _, d := range dirs {
		ExpectWithOffset(1, os.MkdirAll(d, 0o777)).To(Succeed())
		ExpectWithOffset(1, os.Chmod(d, 0o777)).To(Succeed())
	}
}

// identity is the device and inode of a directory on the host, without
// following a link.
func identity(path string) [2]uint64 {
	var st syscall.Stat_t
	ExpectWithOffset(1, syscall.Lstat(path, &st)).To(Succeed())
	return [2]uint64{st.Dev, st.Ino}
}

// workspaceOf is what a running container has at /workspace, seen from the
// host through /proc/<pid>/root (this suite runs where the engine's
// processes are visible), and the names at its top, seen from inside.
func workspaceOf(container string) ([2]uint64, string) {
	c, err := dockertest.Inspect(container)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	ExpectWithOffset(1, c.State.Pid).To(BeNumerically(">", 0))
	var st syscall.Stat_t
	ExpectWithOffset(1, syscall.Lstat(fmt.Sprintf("/proc/%d/root/workspace", c.State.Pid), &st)).To(Succeed())
	// A shell glob lists the names without looking at them (the swap loop
	// changes them meanwhile).
	names, err := dockertest.Exec(container, "sh", "-c", `for f in /workspace/* /workspace/.*; do echo "${f#/workspace/}"; done`)
	ExpectWithOffset(1, err).NotTo(HaveOccurred(), names)
	return [2]uint64{st.Dev, st.Ino}, names
}

// expectWorkspace checks that the container's /workspace is dir, and not
// the host's root.
func expectWorkspace(container, dir string) {
	got, names := workspaceOf(container)
	ExpectWithOffset(1, got).NotTo(Equal(identity("/")), "the host's root is the workspace of %s", container)
	for _, n := range strings.Fields(names) {
		ExpectWithOffset(1, n).NotTo(BeElementOf("etc", "proc", "root", "usr"), "the workspace of %s holds %s: %s", container, n, names)
	}
	ExpectWithOffset(1, got).To(Equal(identity(dir)), "the workspace of %s is not %s", container, dir)
}

// creations counts the containers the engine creates for a Sandbox, from
// its event stream, until stop; -1 when the stream broke (so that a count
// of zero means none was made).
func creations(ns, name string) (count func() int, stop func()) {
	engine, err := docker.New("")
	Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	// From now, whenever the stream opens: the engine replays what came
	// since, so nothing made after this returns is missed.
	evs, errs := engine.Events(ctx, map[string]string{afev1.LabelNamespace: ns, afev1.LabelSandbox: name, afev1.LabelRole: afev1.RoleSandbox}, time.Now())
	var n atomic.Int32
	var broken atomic.Bool
	go func() {
		for {
			select {
			case e, ok := <-evs:
				if !ok {
					broken.Store(ctx.Err() == nil)
					return
				}
				if e.Action == docker.ActionCreate {
					n.Add(1)
				}
			case err := <-errs:
				GinkgoWriter.Printf("event stream of %s/%s ended: %v\n", ns, name, err)
				broken.Store(ctx.Err() == nil)
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	count = func() int {
		if broken.Load() {
			return -1
		}
		return int(n.Load())
	}
	return count, func() { cancel(); _ = engine.Close() }
}

// loopRuns waits until the swap loop has been seen with the link in place.
func loopRuns(sub string) {
	EventuallyWithOffset(1, func() bool {
		fi, err := os.Lstat(sub)
		return err == nil && fi.Mode()&os.ModeSymlink != 0
	}).WithPolling(5 * time.Millisecond).Should(BeTrue())
}

// hasContainer tells whether a Sandbox has a container, running or not.
func hasContainer(sbx *afev1.Sandbox) bool {
	objects, err := dockertest.Objects(uidLabel(sbx))
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	for _, o := range objects {
		if strings.HasPrefix(o, "container/") {
			return true
		}
	}
	return false
}

// recreate removes the Sandbox's container behind the controller's back and
// waits for its replacement, Ready.
func recreate(ctx context.Context, sbx *afev1.Sandbox) *afev1.Sandbox {
	before := getSandbox(ctx, sbx)(Default)
	ExpectWithOffset(1, dockertest.RemoveContainer(before.Status.ContainerName)).To(Succeed())
	var got *afev1.Sandbox
	EventuallyWithOffset(1, func(g Gomega) {
		got = getSandbox(ctx, sbx)(g)
		g.Expect(got.Status.ContainerID).NotTo(BeEmpty())
		g.Expect(got.Status.ContainerID).NotTo(Equal(before.Status.ContainerID))
		g.Expect(got.Status.Phase).To(Equal(afev1.SandboxReady))
	}).Should(Succeed())
	return got
}

var _ = Describe("Folder workspaces", func() {
	var ctx context.Context
	var ns, nsDir string
	BeforeEach(func() {
		ctx = context.Background()
		ns = newNamespace(ctx)
		nsDir = filepath.Join(workspaceRoot, ns)
	})

	// Issue 12: a sandbox on a folder swaps a component of the path of a
	// sandbox on a folder inside it for a link to /. Nested folders are
	// refused, whoever comes first and whatever the tickets, so the pair
	// never exists: the second one never gets a container, the first loses
	// its own.
	DescribeTable("refuses nested folders: the second of the pair never gets a container",
		func(parentTicket, childTicket string, parentFirst bool) {
			a := filepath.Join(nsDir, "a")
			sub := filepath.Join(a, "sub")
			mkdirs(a, sub)
			parent := attacker(ns, "parent", a, parentTicket)
			child := folderSandbox(ns, "child", sub, childTicket)
			first, second := parent, child
			if !parentFirst {
				first, second = child, parent
			}
			Expect(k8sClient.Create(ctx, first)).To(Succeed())
			waitReady(ctx, first)
			if parentFirst {
				loopRuns(sub)
			}
			count, stop := creations(ns, second.Name)
			defer stop()

			Expect(k8sClient.Create(ctx, second)).To(Succeed())
			c := waitCondition(ctx, second, afev1.WorkspaceReadyCondition, metav1.ConditionFalse, afev1.WorkspaceConflictReason)
			Expect(c.Message).To(ContainSubstring("Sandbox " + first.Name))
			c = waitCondition(ctx, first, afev1.WorkspaceReadyCondition, metav1.ConditionFalse, afev1.WorkspaceConflictReason)
			Expect(c.Message).To(ContainSubstring("Sandbox " + second.Name))
			Eventually(func() bool { return hasContainer(first) }).Should(BeFalse(), "the first one's container is removed")
			Expect(getSandbox(ctx, first)(Default).Status.Phase).To(Equal(afev1.SandboxFailed))

			By("reconciling the refused one 50 times: it never gets a container")
			for i := range 50 {
				cur := getSandbox(ctx, second)(Default)
				cur.Spec.Env = []afev1.EnvVar{{Name: "ATTEMPT", Value: fmt.Sprint(i)}}
				Expect(k8sClient.Update(ctx, cur)).To(Succeed())
				Eventually(func(g Gomega) {
					got := getSandbox(ctx, second)(g)
					g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
					c := findCondition(got.Status.Conditions, afev1.WorkspaceReadyCondition)
					g.Expect(c.Reason).To(Equal(afev1.WorkspaceConflictReason))
				}).Should(Succeed())
				Expect(hasContainer(second)).To(BeFalse())
			}
			Expect(count()).To(BeZero(), "containers created for %s", second.Name)
			Expect(hasContainer(first)).To(BeFalse())

			By("deleting the parent: the child comes back, on its own folder")
			// The loop was killed with the parent's container: put sub back
			// should it have died with the link in place, or between the
			// rename and the link (then sub is missing for a while: the
			// child waits, WorkspaceMissing, and comes back once it is).
			restoreAfterLoop(sub)
			deleteAndWaitGone(ctx, parent)
			got := waitReady(ctx, child)
			expectWorkspace(got.Status.ContainerName, sub)
			deleteAndWaitGone(ctx, child)
		},
		Entry("the issue's pair: the parent first, other tickets", "", "", true),
		Entry("the pair on one ticket", "tk", "tk", true),
		Entry("the child first, then the parent", "", "", false),
	)

	It("waits for a folder that is not there yet, and uses it once it is", func() {
		later := filepath.Join(nsDir, "later")
		sbx := folderSandbox(ns, "later", later, "")
		Expect(k8sClient.Create(ctx, sbx)).To(Succeed())
		c := waitCondition(ctx, sbx, afev1.WorkspaceReadyCondition, metav1.ConditionFalse, afev1.WorkspaceMissingReason)
		Expect(c.Message).To(ContainSubstring("create the folder"))
		Expect(hasContainer(sbx)).To(BeFalse())
		mkdirs(later)
		got := waitReady(ctx, sbx)
		expectWorkspace(got.Status.ContainerName, later)
		deleteAndWaitGone(ctx, sbx)
	})

	It("refuses folders reached through a link, whoever made it", func() {
		a, b := filepath.Join(nsDir, "a"), filepath.Join(nsDir, "b")
		mkdirs(a, b)
		holder := folderSandbox(ns, "holder", b, "")
		Expect(k8sClient.Create(ctx, holder)).To(Succeed())
		holder = waitReady(ctx, holder)
		_, err := dockertest.Exec(holder.Status.ContainerName, "ln", "-s", "/", "/workspace/escape")
		Expect(err).NotTo(HaveOccurred())
		Expect(os.Symlink(a, filepath.Join(nsDir, "alias"))).To(Succeed())
		Expect(os.Symlink("/", filepath.Join(nsDir, "hostroot"))).To(Succeed())
		refused := func(name, dir, reason string) {
			count, stop := creations(ns, name)
			defer stop()
			sbx := folderSandbox(ns, name, dir, "")
			Expect(k8sClient.Create(ctx, sbx)).To(Succeed())
			waitCondition(ctx, sbx, afev1.WorkspaceReadyCondition, metav1.ConditionFalse, reason)
			Consistently(func() bool { return hasContainer(sbx) }, "1s").Should(BeFalse())
			deleteAndWaitGone(ctx, sbx)
			Expect(count()).To(BeZero(), "containers created for %s", name)
		}

		By("a link the holder's workload made, inside its folder: nested, refused")
		refused("via-workload-link", filepath.Join(b, "escape"), afev1.WorkspaceConflictReason)
		waitReady(ctx, holder)
		By("links on the host, and the workload's link once its sandbox is gone")
		refused("alias", filepath.Join(nsDir, "alias"), afev1.WorkspaceSymlinkReason)
		refused("hostroot", filepath.Join(nsDir, "hostroot"), afev1.WorkspaceSymlinkReason)
		deleteAndWaitGone(ctx, holder)
		refused("via-workload-link", filepath.Join(b, "escape"), afev1.WorkspaceSymlinkReason)
		refused("via-workload-link-etc", filepath.Join(b, "escape", "etc"), afev1.WorkspaceSymlinkReason)
	})

	// What is allowed beside the swap loop: a sandbox of the same ticket on
	// the same folder, and one of another ticket on a sibling folder. No
	// component of their paths is writable by the loop, so recreating them
	// over and over never hands them another directory.
	// Twelve recreations of the sibling (three of the neighbour) each span
	// dozens of the loop's swaps: a check that followed the link would
	// refuse or misplace one of them. Fifty (six minutes on a slow day)
	// proved nothing more.
	It("keeps the workspaces of an allowed pair through 12 recreations beside the swap loop", func() {
		a, b := filepath.Join(nsDir, "a"), filepath.Join(nsDir, "b")
		mkdirs(a, filepath.Join(a, "sub"), b)
		parent := attacker(ns, "parent", a, "tk")
		sibling := folderSandbox(ns, "sibling", a, "tk")
		neighbour := folderSandbox(ns, "neighbour", b, "other")
		for _, s := range []*afev1.Sandbox{parent, sibling, neighbour} {
			Expect(k8sClient.Create(ctx, s)).To(Succeed())
		}
		parent = waitReady(ctx, parent)
		waitReady(ctx, sibling)
		waitReady(ctx, neighbour)
		loopRuns(filepath.Join(a, "sub"))
		t0 := time.Now()
		for i := range 12 {
			got := recreate(ctx, sibling)
			expectWorkspace(got.Status.ContainerName, a)
			if i%4 == 0 {
				got = recreate(ctx, neighbour)
				expectWorkspace(got.Status.ContainerName, b)
			}
		}
		GinkgoWriter.Printf("12 recreations beside the swap loop: %s\n", time.Since(t0))
		By("the loop ran all along, and was never refused")
		loopRuns(filepath.Join(a, "sub"))
		got := getSandbox(ctx, parent)(Default)
		Expect(got.Status.ContainerID).To(Equal(parent.Status.ContainerID))
		Expect(got.Status.Phase).To(Equal(afev1.SandboxReady))
		for _, s := range []*afev1.Sandbox{parent, sibling, neighbour} {
			deleteAndWaitGone(ctx, s)
		}
	})

	It("lets the scopes of one ticket share a folder and refuses it to another ticket", func() {
		shared := filepath.Join(nsDir, "shared")
		mkdirs(shared)
		tk := newTicket(ns, "owner", "a", "b")
		tk.Spec.Sandbox.Workspace = afev1.WorkspaceSpec{Type: afev1.WorkspaceFolder, HostPath: shared}
		Expect(k8sClient.Create(ctx, tk)).To(Succeed())
		Expect(waitTicketPhase(ctx, tk, afev1.TicketReady).Status.Ready).To(Equal("2/2"))
		scopeA := &afev1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "owner-a"}}
		scopeB := &afev1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "owner-b"}}
		expectWorkspace(getSandbox(ctx, scopeA)(Default).Status.ContainerName, shared)
		expectWorkspace(getSandbox(ctx, scopeB)(Default).Status.ContainerName, shared)

		count, stop := creations(ns, "intruder")
		defer stop()
		intruder := folderSandbox(ns, "intruder", shared, "another")
		Expect(k8sClient.Create(ctx, intruder)).To(Succeed())
		c := waitCondition(ctx, intruder, afev1.WorkspaceReadyCondition, metav1.ConditionFalse, afev1.WorkspaceConflictReason)
		Expect(c.Message).To(ContainSubstring("Sandbox owner-a"))
		Expect(c.Message).To(ContainSubstring("another ticket"))
		for _, s := range []*afev1.Sandbox{scopeA, scopeB} {
			c := waitCondition(ctx, s, afev1.WorkspaceReadyCondition, metav1.ConditionFalse, afev1.WorkspaceConflictReason)
			Expect(c.Message).To(ContainSubstring("Sandbox intruder"))
			Eventually(func() bool { return hasContainer(s) }).Should(BeFalse())
		}
		Expect(count()).To(BeZero())

		By("removing the intruder: the ticket's scopes come back")
		deleteAndWaitGone(ctx, intruder)
		Expect(waitTicketPhase(ctx, tk, afev1.TicketReady).Status.Ready).To(Equal("2/2"))
		Expect(getSandbox(ctx, scopeA)(Default).Status.Recreations).To(BeZero(), "a refusal is not a loss")
		Expect(k8sClient.Delete(ctx, tk)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(tk), &afev1.Ticket{}))
		}).Should(BeTrue())
	})

	It("refuses a folder of another namespace and leaves that namespace alone", func() {
		other := newNamespace(ctx)
		theirs := filepath.Join(workspaceRoot, other, "x")
		mkdirs(theirs)
		owner := folderSandbox(other, "owner", theirs, "")
		Expect(k8sClient.Create(ctx, owner)).To(Succeed())
		owner = waitReady(ctx, owner)

		for name, dir := range map[string]string{"theirs": theirs, "their-parent": filepath.Dir(theirs), "inside-theirs": filepath.Join(theirs, "y")} {
			Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
			sbx := folderSandbox(ns, name, dir, "")
			Expect(k8sClient.Create(ctx, sbx)).To(Succeed())
			waitCondition(ctx, sbx, afev1.WorkspaceReadyCondition, metav1.ConditionFalse, afev1.WorkspaceOutsideRootReason)
			Consistently(func() bool { return hasContainer(sbx) }, "1s").Should(BeFalse())
			deleteAndWaitGone(ctx, sbx)
		}
		got := getSandbox(ctx, owner)(Default)
		Expect(got.Status.Phase).To(Equal(afev1.SandboxReady))
		Expect(got.Status.ContainerID).To(Equal(owner.Status.ContainerID))
		deleteAndWaitGone(ctx, owner)
	})

	// The Sandbox's spec no longer names the folder, but its container,
	// kept because the new image cannot be pulled, still has it mounted
	// with the swap loop running: a sandbox on a folder inside waits.
	It("waits while a container still has an enclosing folder mounted", func() {
		a, b := filepath.Join(nsDir, "a"), filepath.Join(nsDir, "b")
		sub := filepath.Join(a, "sub")
		mkdirs(a, sub, b)
		parent := attacker(ns, "parent", a, "")
		Expect(k8sClient.Create(ctx, parent)).To(Succeed())
		parent = waitReady(ctx, parent)
		loopRuns(sub)
		cur := getSandbox(ctx, parent)(Default)
		cur.Spec.Workspace.HostPath = b
		cur.Spec.Image = fmt.Sprintf("127.0.0.1:1/afe/missing-%d:never", GinkgoParallelProcess())
		Expect(k8sClient.Update(ctx, cur)).To(Succeed())
		waitCondition(ctx, parent, afev1.ContainerReadyCondition, metav1.ConditionFalse, afev1.ImagePullFailedReason)
		Expect(hasContainer(parent)).To(BeTrue(), "the old container is kept")

		count, stop := creations(ns, "child")
		defer stop()
		child := folderSandbox(ns, "child", sub, "")
		Expect(k8sClient.Create(ctx, child)).To(Succeed())
		c := waitCondition(ctx, child, afev1.WorkspaceReadyCondition, metav1.ConditionFalse, afev1.WorkspaceConflictReason)
		Expect(c.Message).To(ContainSubstring("still has " + a + " mounted"))
		Consistently(count, "6s").Should(BeZero(), "no container while the loop can reach the path")

		By("letting the parent move: its old container goes, the child follows")
		cur = getSandbox(ctx, parent)(Default)
		cur.Spec.Image = dockertest.TestImage
		Expect(k8sClient.Update(ctx, cur)).To(Succeed())
		got := waitReady(ctx, parent)
		expectWorkspace(got.Status.ContainerName, b)
		if fi, err := os.Lstat(sub); err == nil && fi.Mode()&os.ModeSymlink != 0 {
			// The loop died with the link in place: the child is refused
			// for it (and is looked at again when its spec changes).
			waitCondition(ctx, child, afev1.WorkspaceReadyCondition, metav1.ConditionFalse, afev1.WorkspaceSymlinkReason)
			restoreAfterLoop(sub)
			cur := getSandbox(ctx, child)(Default)
			cur.Spec.Env = []afev1.EnvVar{{Name: "AGAIN", Value: "1"}}
			Expect(k8sClient.Update(ctx, cur)).To(Succeed())
		}
		// Died between the rename and the link: the child waits
		// (WorkspaceMissing) until sub is back.
		restoreAfterLoop(sub)
		got = waitReady(ctx, child)
		expectWorkspace(got.Status.ContainerName, sub)
		deleteAndWaitGone(ctx, child)
		deleteAndWaitGone(ctx, parent)
	})

	It("never copies a snapshot through a symbolic link", func() {
		a := filepath.Join(nsDir, "a")
		mkdirs(a)
		sbx := folderSandbox(ns, "snap", a, "")
		Expect(k8sClient.Create(ctx, sbx)).To(Succeed())
		waitReady(ctx, sbx)
		// Behind the controller's back, on the host: the folder becomes a
		// link to another namespace's folder, still inside the root.
		theirs := filepath.Join(workspaceRoot, ns+"-other", "secret")
		mkdirs(theirs)
		Expect(os.WriteFile(filepath.Join(theirs, "token"), []byte("s3cr3t"), 0o600)).To(Succeed())
		Expect(os.Rename(a, a+".real")).To(Succeed())
		Expect(os.Symlink(theirs, a)).To(Succeed())

		run := newSnapshotRun(ns, "snap", sbx.Name)
		Expect(k8sClient.Create(ctx, run)).To(Succeed())
		// Either check may see the link first: the snapshot's own (the Run
		// fails), or the Sandbox's, when a reconcile of it comes after the
		// swap (its container is removed and the Run waits). Neither copies.
		var got *afev1.Run
		Eventually(func(g Gomega) {
			got = getRun(ctx, run)(g)
			if got.Status.Phase == afev1.RunFailed {
				c := findCondition(got.Status.Conditions, afev1.RunCompletedCondition)
				g.Expect(c.Reason).To(Equal(afev1.SnapshotFailedReason))
				g.Expect(c.Message).To(ContainSubstring("symbolic link"))
				return
			}
			g.Expect(got.Status.Phase).To(Equal(afev1.RunPending), "status: %+v", got.Status)
			c := meta.FindStatusCondition(getSandbox(ctx, sbx)(g).Status.Conditions, afev1.ContainerReadyCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(afev1.WorkspaceSymlinkReason))
		}).Should(Succeed())
		GinkgoWriter.Printf("the link was refused with the Run %s\n", got.Status.Phase)
		Expect(dockertest.Objects(afev1.LabelRunUID+"="+string(got.UID))).To(BeEmpty(), "no snapshot volume")
		deleteAndWaitGone(ctx, sbx)
	})
})
