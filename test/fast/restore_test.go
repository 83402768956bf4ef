package fast

import (
	"context"
	"errors"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/naming"
	"afe.dev/sandbox/test/fakeengine"
)

// A sandbox whose workspace starts from a snapshot gets it again, fresh,
// when its container is lost; a restore that fails or finds no snapshot
// holds the recreation back without counting the loss again, and finishes
// it once it can.
var _ = Describe("Loss during a restore", func() {
	var (
		ns, snapshot string
		sbx          *afev1.Sandbox
	)
	seed := map[string]string{"seed.txt": "from the snapshot"}

	putSnapshot := func(ctx context.Context) {
		_, err := engine.EnsureVolume(ctx, docker.VolumeSpec{Name: snapshot, Labels: map[string]string{
			afev1.LabelController: instance, afev1.LabelNamespace: ns, afev1.LabelRole: afev1.RoleSnapshot,
		}})
		Expect(err).NotTo(HaveOccurred())
		for p, content := range seed {
			Expect(engine.WriteFile(snapshot, p, content)).To(Succeed())
		}
	}
	workspace := func() map[string]string { return engine.Files(naming.Volume(key(sbx))) }
	recreations := func(g Gomega) int32 { return getSandbox(context.Background(), sbx)(g).Status.Recreations }

	BeforeEach(func(ctx context.Context) {
		ns = newNamespace(ctx)
		snapshot = "afe-" + ns + "-seed_snap-1"
		putSnapshot(ctx)
		DeferCleanup(func(ctx context.Context) { Expect(engine.RemoveVolume(ctx, snapshot)).To(Succeed()) })
		sbx = newSandbox(ns, "restored")
		sbx.Spec.Workspace.FromSnapshot = snapshot
		create(ctx, sbx)
		waitCondition(ctx, sbx, afev1.WorkspaceReadyCondition, "True", afev1.RestoredFromSnapshotReason)
		waitReady(ctx, sbx)
		Expect(workspace()).To(Equal(seed))
		Expect(engine.WriteFile(naming.Volume(key(sbx)), "scratch.txt", "made in the sandbox")).To(Succeed())
	})

	It("restores the snapshot, not the lost workspace, into the replacement", func(ctx context.Context) {
		lost := container(ctx, naming.Container(key(sbx)))
		Expect(engine.Exit(lost.Name, 137, false)).To(Succeed())
		Eventually(recreations).Should(BeEquivalentTo(1))
		got := waitReady(ctx, sbx)
		Expect(got.Status.ContainerID).NotTo(Equal(lost.ID))
		Expect(workspace()).To(Equal(seed))
	})

	// failedRestore loses the container while every restore fails with
	// err, then lets the restores through.
	failedRestore := func(ctx context.Context, err error) {
		clear := engine.Fail(fakeengine.Fault{Op: fakeengine.OpCopyWorkspace, Err: err})
		DeferCleanup(clear)
		Expect(engine.Exit(naming.Container(key(sbx)), 137, false)).To(Succeed())
		Eventually(recreations).Should(BeEquivalentTo(1))
		// Retried, not counted again, and no container on a workspace
		// that was not restored.
		Consistently(func(g Gomega) {
			g.Expect(recreations(g)).To(BeEquivalentTo(1))
			c := container(ctx, naming.Container(key(sbx)))
			g.Expect(c == nil || !c.Running).To(BeTrue(), "a container runs on a workspace not restored: %+v", c)
		}, 2*time.Second).Should(Succeed())

		clear()
		waitReady(ctx, sbx)
		Expect(recreations(Default)).To(BeEquivalentTo(1))
		Expect(workspace()).To(Equal(seed))
		Expect(engine.Objects(map[string]string{afev1.LabelController: instance, afev1.LabelRole: afev1.RoleSnapshotCopy})).To(BeEmpty(), "copy helpers left")
	}

	It("finishes a recreation whose restore failed, counting the loss once", func(ctx context.Context) {
		failedRestore(ctx, errors.New("write /workspace: no space left on device"))
	})

	It("finishes a recreation whose restore the engine's outage cut short, counting the loss once", func(ctx context.Context) {
		failedRestore(ctx, docker.ErrUnavailable)
	})

	It("waits for a snapshot gone at the loss, and restores it once back", func(ctx context.Context) {
		Expect(engine.RemoveVolume(ctx, snapshot)).To(Succeed())
		Expect(engine.Exit(naming.Container(key(sbx)), 137, false)).To(Succeed())
		waitCondition(ctx, sbx, afev1.WorkspaceReadyCondition, "False", afev1.SnapshotNotFoundReason)
		Consistently(func(g Gomega) {
			g.Expect(recreations(g)).To(BeEquivalentTo(1))
			c := container(ctx, naming.Container(key(sbx)))
			g.Expect(c == nil || !c.Running).To(BeTrue(), "a container runs without its snapshot: %+v", c)
		}, 2*time.Second).Should(Succeed())

		putSnapshot(ctx)
		waitReady(ctx, sbx)
		Expect(recreations(Default)).To(BeEquivalentTo(1))
		Expect(workspace()).To(Equal(seed))
	})
})
