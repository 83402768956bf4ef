package fast

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/naming"
	"afe.dev/sandbox/test/fakeengine"
)

// A name that another controller instance's object holds is reported and
// waited on: nothing of the other object is adopted or removed, and nothing
// that would need it is made.
var _ = Describe("Name conflicts", func() {
	var ns string
	BeforeEach(func(ctx context.Context) { ns = newNamespace(ctx) })

	It("leaves a container of another instance alone and says so", func(ctx context.Context) {
		sbx := newSandbox(ns, "taken")
		foreign, err := engine.RunContainer(ctx, docker.ContainerSpec{Name: naming.Container(key(sbx)), Image: testImage,
			Network: "none", Labels: foreignLabels(sbx, afev1.RoleSandbox)})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx context.Context) { Expect(engine.RemoveContainer(ctx, foreign.ID)).To(Succeed()) })

		create(ctx, sbx)
		got := waitCondition(ctx, sbx, afev1.ContainerReadyCondition, "False", afev1.NameConflictReason)
		Expect(conditionStatus(got, afev1.SandboxReadyCondition)).To(BeEquivalentTo("False"))
		Expect(got.Status.ContainerID).To(BeEmpty())
		now := container(ctx, foreign.Name)
		Expect(now).NotTo(BeNil())
		Expect(now.ID).To(Equal(foreign.ID))
		Expect(now.Running).To(BeTrue())
		Expect(now.Labels).To(Equal(foreignLabels(sbx, afev1.RoleSandbox)))
	})

	It("makes no container when the workspace volume's name is taken", func(ctx context.Context) {
		sbx := newSandbox(ns, "volume")
		_, err := engine.EnsureVolume(ctx, docker.VolumeSpec{Name: naming.Volume(key(sbx)), Labels: foreignLabels(sbx, afev1.RoleWorkspace)})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx context.Context) { Expect(engine.RemoveVolume(ctx, naming.Volume(key(sbx)))).To(Succeed()) })

		create(ctx, sbx)
		waitCondition(ctx, sbx, afev1.WorkspaceReadyCondition, "False", afev1.NameConflictReason)
		Consistently(func() *docker.Container { return container(ctx, naming.Container(key(sbx))) }, "1s").Should(BeNil())
		v, err := engine.InspectVolume(ctx, naming.Volume(key(sbx)))
		Expect(err).NotTo(HaveOccurred())
		Expect(v.Labels).To(Equal(foreignLabels(sbx, afev1.RoleWorkspace)))
	})

	It("makes no proxy when the internal network's name is taken", func(ctx context.Context) {
		sbx := newSandbox(ns, "network", "example.com")
		n, err := engine.EnsureNetwork(ctx, docker.NetworkSpec{Name: naming.Network(key(sbx)), Labels: foreignLabels(sbx, afev1.RoleNetwork), Internal: true})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx context.Context) { Expect(engine.RemoveNetwork(ctx, n.ID)).To(Succeed()) })

		create(ctx, sbx)
		waitCondition(ctx, sbx, afev1.EgressReadyCondition, "False", afev1.NameConflictReason)
		Consistently(func() *docker.Container { return container(ctx, naming.Proxy(key(sbx))) }, "1s").Should(BeNil())
		Expect(container(ctx, naming.Container(key(sbx)))).To(BeNil())
		now, err := engine.InspectNetwork(ctx, n.Name)
		Expect(err).NotTo(HaveOccurred())
		Expect(now.ID).To(Equal(n.ID))
	})

	It("reports a name taken between its look and its create", func(ctx context.Context) {
		sbx := newSandbox(ns, "race")
		clear := engine.Fail(fakeengine.Fault{Op: fakeengine.OpRunContainer, Target: naming.Container(key(sbx)), Err: docker.ErrConflict})
		DeferCleanup(clear)

		create(ctx, sbx)
		got := waitCondition(ctx, sbx, afev1.ContainerReadyCondition, "False", afev1.NameConflictReason)
		Expect(got.Status.ContainerID).To(BeEmpty())
		// The workspace the sandbox made is its own and stays for the retry.
		Expect(objectsOf(sbx)).To(Equal([]string{"volume/" + naming.Volume(key(sbx))}))
	})
})
