package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/naming"
	"afe.dev/sandbox/internal/sandboxspec"
	"afe.dev/sandbox/test/dockertest"
)

// Tenant isolation (docs/threat-model.md): nothing one tenant writes, status
// included, makes the controller act on another tenant's Docker objects.
var _ = Describe("Tenant isolation", func() {
	var ctx context.Context
	var ns string
	BeforeEach(func() {
		ctx = context.Background()
		ns = newNamespace(ctx)
	})

	It("never runs a command in the container a forged status names, and repairs the status", func() {
		victimNS := newNamespace(ctx)
		victim := newSandbox(victimNS, "victim")
		victim.Spec.Env = []afev1.EnvVar{{Name: "SECRET_TOKEN", Value: "victim-secret-42"}}
		mine := newSandbox(ns, "mine")
		mine.Spec.Env = []afev1.EnvVar{{Name: "MINE", Value: "attacker"}}
		Expect(k8sClient.Create(ctx, victim)).To(Succeed())
		Expect(k8sClient.Create(ctx, mine)).To(Succeed())
		victim, mine = waitReady(ctx, victim), waitReady(ctx, mine)
		DeferCleanup(func() { deleteAndWaitGone(ctx, mine); deleteAndWaitGone(ctx, victim) })

		// What a user allowed to write sandboxes/status in their own
		// namespace can do: point every status field at the victim's.
		forged := mine.DeepCopy()
		forged.Status.ContainerName = victim.Status.ContainerName
		forged.Status.ContainerID = victim.Status.ContainerID
		forged.Status.VolumeName = victim.Status.VolumeName
		Expect(k8sClient.Status().Patch(ctx, forged, client.MergeFrom(mine))).To(Succeed())
		// The API server's answer (written into forged) holds the forged
		// fields; a read after it may already see the controller's repair.
		Expect(forged.Status.ContainerName).To(Equal(victim.Status.ContainerName), "the API server took the forged status")
		Expect(forged.Status.ContainerID).To(Equal(victim.Status.ContainerID))
		Expect(forged.Status.VolumeName).To(Equal(victim.Status.VolumeName))

		run := newRun(ns, "env", mine.Name)
		run.Spec.Command = []string{"env"}
		Expect(k8sClient.Create(ctx, run)).To(Succeed())
		got := waitRunPhase(ctx, run, afev1.RunCompleted)
		Expect(got.Status.Output).To(ContainSubstring("MINE=attacker"), "the Run ran in its own sandbox")
		Expect(got.Status.Output).NotTo(ContainSubstring("victim-secret-42"))
		Expect(got.Status.ContainerID).To(Equal(mine.Status.ContainerID))

		snap := newSnapshotRun(ns, "snap", mine.Name)
		Expect(k8sClient.Create(ctx, snap)).To(Succeed())
		snapped := waitRunPhase(ctx, snap, afev1.RunCompleted)
		Expect(volumeLabels(result(snapped)["snapshot"].(string))[afev1.LabelSandboxUID]).To(Equal(string(mine.UID)))

		// The sweep (every 2 s here) finds the status disagreeing with the
		// sandbox's own objects and a reconcile writes it again.
		Eventually(func(g Gomega) {
			s := getSandbox(ctx, mine)(g)
			g.Expect(s.Status.ContainerName).To(Equal(mine.Status.ContainerName))
			g.Expect(s.Status.ContainerID).To(Equal(mine.Status.ContainerID))
			g.Expect(s.Status.VolumeName).To(Equal(mine.Status.VolumeName))
		}, "20s").Should(Succeed())
	})

	It("gives every sandbox of a namespace its own Docker names, whatever their Kubernetes names", func() {
		x := newSandbox(ns, "x")
		x.Spec.Egress = []afev1.EgressHost{"allowed.test"}
		Expect(k8sClient.Create(ctx, x)).To(Succeed())
		x = waitReady(ctx, x)
		// Sandboxes named like x's proxy, network, workspace and snapshot
		// copy helpers under the old naming.
		var others []*afev1.Sandbox
		for _, n := range []string{"x-proxy", "x-net", "x-ws", "x-snap-1-copy-from", "x-snap-1-copy-to"} {
			o := newSandbox(ns, n)
			Expect(k8sClient.Create(ctx, o)).To(Succeed())
			others = append(others, o)
		}
		DeferCleanup(func() {
			for _, o := range others {
				deleteAndWaitGone(ctx, o)
			}
			deleteAndWaitGone(ctx, x)
		})
		for i, o := range others {
			others[i] = waitReady(ctx, o)
		}
		// A snapshot of x makes and removes its copy helpers; the sandboxes
		// named like the old helpers are untouched.
		snap := newSnapshotRun(ns, "snap", x.Name)
		Expect(k8sClient.Create(ctx, snap)).To(Succeed())
		waitRunPhase(ctx, snap, afev1.RunCompleted)
		for _, o := range others {
			c, err := dockertest.Inspect(o.Status.ContainerName)
			Expect(err).NotTo(HaveOccurred())
			Expect(c.ID).To(Equal(o.Status.ContainerID), "sandbox %s kept its container", o.Name)
			Expect(c.State.Running).To(BeTrue())
		}
		Expect(getSandbox(ctx, x)(Default).Status.Recreations).To(BeZero())
	})

	It("removes a stale container of an earlier sandbox of the same name at once", func() {
		name := "again"
		key := naming.Key(ns, name)
		// What a deleted Sandbox "again" of this instance left: its
		// container under the name, with its UID.
		stale := []string{
			"--label", afev1.LabelController + "=" + instance,
			"--label", afev1.LabelSandboxUID + "=gone-" + rand.String(6),
			"--label", afev1.LabelNamespace + "=" + ns,
			"--label", afev1.LabelSandbox + "=" + name,
			"--label", afev1.LabelRole + "=" + afev1.RoleSandbox,
		}
		// The sweep may remove it between its creation and its start (it
		// is an orphan until the Sandbox exists): made again then.
		Eventually(func() (string, error) {
			out, err := exec.Command("docker", append(append([]string{"run", "-d", "--network", "none", "--name", naming.Container(key)}, stale...),
				dockertest.TestImage, "sleep", "600")...).CombinedOutput()
			if err != nil {
				_ = exec.Command("docker", "rm", "-f", naming.Container(key)).Run()
			}
			return string(out), err
		}, "30s", "100ms").Should(Not(BeEmpty()))
		sbx := newSandbox(ns, name)
		Expect(k8sClient.Create(ctx, sbx)).To(Succeed())
		DeferCleanup(func() { deleteAndWaitGone(ctx, sbx) })

		// The Sandbox never reports a conflict over it, and is Ready well
		// before the conflict's retry (30 s) would have looked again.
		var conflict string
		Eventually(func(g Gomega) {
			got := getSandbox(ctx, sbx)(g)
			for _, c := range got.Status.Conditions {
				if c.Reason == afev1.NameConflictReason {
					conflict = c.Message
				}
			}
			g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, afev1.SandboxReadyCondition)).To(BeTrue())
		}, "15s", "20ms").Should(Succeed())
		Expect(conflict).To(BeEmpty())
	})

	It("leaves a container of another instance under a sandbox's name alone, as a conflict", func() {
		name := "taken"
		key := naming.Key(ns, name)
		foreign := []string{
			"--label", afev1.LabelController + "=another-instance",
			"--label", afev1.LabelSandboxUID + "=gone-" + rand.String(6),
			"--label", afev1.LabelNamespace + "=" + ns,
			"--label", afev1.LabelSandbox + "=" + name,
			"--label", afev1.LabelRole + "=" + afev1.RoleSandbox,
		}
		out, err := exec.Command("docker", append(append([]string{"run", "-d", "--network", "none", "--name", naming.Container(key)}, foreign...),
			dockertest.TestImage, "sleep", "600")...).CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
		DeferCleanup(func() { _ = dockertest.RemoveContainer(naming.Container(key)) })
		sbx := newSandbox(ns, name)
		Expect(k8sClient.Create(ctx, sbx)).To(Succeed())
		DeferCleanup(func() { deleteAndWaitGone(ctx, sbx) })
		waitCondition(ctx, sbx, afev1.ContainerReadyCondition, "False", afev1.NameConflictReason)
		c, err := dockertest.Inspect(naming.Container(key))
		Expect(err).NotTo(HaveOccurred())
		Expect(c.State.Running).To(BeTrue())
		Expect(c.Config.Labels[afev1.LabelController]).To(Equal("another-instance"))
	})

	// Each of the labels adoption checks, spoiled alone on a container
	// planted under the sandbox's name with its very UID: the container is
	// never adopted, and left running. The control, with no label spoiled,
	// is adopted as it is (same ID): the check that refused is the label's.
	DescribeTable("adopts a planted container only when every label it checks is the sandbox's",
		func(spoil string, adopted bool) {
			name := "planted"
			key := naming.Key(ns, name)
			sbx := newSandbox(ns, name)
			// An image that cannot be pulled holds the controller off
			// while the container is planted.
			sbx.Spec.Image = fmt.Sprintf("127.0.0.1:1/afe/missing-%d:never", GinkgoParallelProcess())
			Expect(k8sClient.Create(ctx, sbx)).To(Succeed())
			DeferCleanup(func() { deleteAndWaitGone(ctx, sbx) })
			waitCondition(ctx, sbx, afev1.ContainerReadyCondition, "False", afev1.ImagePullFailedReason)
			sbx = getSandbox(ctx, sbx)(Default)
			labels := sandboxspec.IdentityOf(sbx, instance).Labels(afev1.RoleSandbox)
			if spoil != "" {
				labels[spoil] = "spoiled"
			}
			args := []string{"run", "-d", "--network", "none", "--name", naming.Container(key)}
			for k, v := range labels {
				args = append(args, "--label", k+"="+v)
			}
			out, err := exec.Command("docker", append(args, dockertest.TestImage, "sleep", "600")...).CombinedOutput()
			Expect(err).NotTo(HaveOccurred(), string(out))
			DeferCleanup(func() { _ = dockertest.RemoveContainer(naming.Container(key)) })
			planted, err := dockertest.Inspect(naming.Container(key))
			Expect(err).NotTo(HaveOccurred())

			Eventually(func(g Gomega) {
				cur := getSandbox(ctx, sbx)(g)
				cur.Spec.Image = dockertest.TestImage
				g.Expect(k8sClient.Update(ctx, cur)).To(Succeed())
			}).Should(Succeed())
			if !adopted {
				waitCondition(ctx, sbx, afev1.ContainerReadyCondition, "False", afev1.NameConflictReason)
				Consistently(func(g Gomega) {
					c, err := dockertest.Inspect(naming.Container(key))
					g.Expect(err).NotTo(HaveOccurred())
					g.Expect(c.ID).To(Equal(planted.ID))
					g.Expect(c.State.Running).To(BeTrue())
				}, "2s").Should(Succeed(), "the planted container is left alone")
				return
			}
			// Adopted: its spec hash is not the sandbox's, so it is then
			// replaced as drift; what matters is that it was taken as the
			// sandbox's own, not a conflict.
			got := waitReady(ctx, sbx)
			Expect(findCondition(got.Status.Conditions, afev1.ContainerReadyCondition).Reason).NotTo(Equal(afev1.NameConflictReason))
		},
		Entry("the control: every label the sandbox's", "", true),
		Entry("another controller instance", afev1.LabelController, false),
		Entry("another role", afev1.LabelRole, false),
	)

	It("gives a ticket of the longest name its sandbox", func() {
		name := strings.Repeat("t", 240) + "." + strings.Repeat("u", 12)
		tk := newTicket(ns, name)
		Expect(k8sClient.Create(ctx, tk)).To(Succeed())
		DeferCleanup(func() {
			setState(ctx, tk, afev1.TicketDone)
			waitTicketPhase(ctx, tk, afev1.TicketFinished)
		})
		got := waitTicketPhase(ctx, tk, afev1.TicketReady)
		Expect(got.Status.ReadySandboxes).To(BeEquivalentTo(1))
		sbx := getSandbox(ctx, &afev1.Sandbox{ObjectMeta: tk.ObjectMeta})(Default)
		Expect(sbx.Labels).To(HaveKeyWithValue(afev1.TicketUIDLabel, string(got.UID)))
		Expect(sbx.Labels).NotTo(HaveKey(afev1.TicketLabel), "the name does not fit in a label value")
	})

	It("reports ok, timedOut, outputTruncated and exitCode of every ended Run, false and 0 included", func() {
		sbx := newSandbox(ns, "runs")
		Expect(k8sClient.Create(ctx, sbx)).To(Succeed())
		DeferCleanup(func() { deleteAndWaitGone(ctx, sbx) })
		waitReady(ctx, sbx)
		for _, tc := range []struct {
			name    string
			command []string
			phase   afev1.RunPhase
			want    map[string]any
		}{
			{"zero", []string{"true"}, afev1.RunCompleted, map[string]any{"ok": true, "timedOut": false, "outputTruncated": false, "exitCode": int64(0)}},
			{"nonzero", []string{"false"}, afev1.RunCompleted, map[string]any{"ok": false, "timedOut": false, "outputTruncated": false, "exitCode": int64(1)}},
			{"notfound", []string{"/no/such/program"}, afev1.RunFailed, map[string]any{"ok": false, "timedOut": false, "outputTruncated": false}},
		} {
			run := newRun(ns, tc.name, sbx.Name)
			run.Spec.Command = tc.command
			Expect(k8sClient.Create(ctx, run)).To(Succeed())
			waitRunPhase(ctx, run, tc.phase)
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(schema.GroupVersionKind{Group: afev1.GroupVersion.Group, Version: afev1.GroupVersion.Version, Kind: "Run"})
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(run), u)).To(Succeed())
			status := u.Object["status"].(map[string]any)
			for k, v := range tc.want {
				Expect(status).To(HaveKeyWithValue(k, v), "run %s: status.%s", tc.name, k)
			}
			Expect(status).To(HaveKey("exitCode"), "run %s", tc.name)
		}
	})

	It("gives an image's VOLUME a volume named and labelled as the sandbox's, fresh in each new container, a docker rm -f included, and gone with the sandbox", func() {
		image := "afe/volume-test:" + strings.ToLower(rand.String(8))
		dir := GinkgoT().TempDir()
		Expect(os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM "+dockertest.TestImage+"\nVOLUME /data\n"), 0o644)).To(Succeed())
		build := exec.Command("docker", "build", "-q", "-t", image, dir)
		build.Env = append(os.Environ(), "DOCKER_BUILDKIT=0")
		out, err := build.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
		DeferCleanup(func() { _ = exec.Command("docker", "rmi", "-f", image).Run() })

		sbx := newSandbox(ns, "volumes")
		sbx.Spec.Image = image
		Expect(k8sClient.Create(ctx, sbx)).To(Succeed())
		DeferCleanup(func() { deleteAndWaitGone(ctx, sbx) })
		want := naming.ImageVolume(naming.Key(ns, sbx.Name), "/data")
		volumeAt := func(name string) string {
			c, err := dockertest.Inspect(name)
			Expect(err).NotTo(HaveOccurred())
			for _, m := range c.Mounts {
				if m.Destination == "/data" {
					return m.Name
				}
			}
			return ""
		}
		labelsOf := func(volume string) map[string]string {
			out, err := exec.Command("docker", "volume", "inspect", "-f", "{{json .Labels}}", volume).Output()
			Expect(err).NotTo(HaveOccurred())
			var l map[string]string
			Expect(json.Unmarshal(out, &l)).To(Succeed())
			return l
		}
		var id string
		// Made, then recreated by the controller: after the container
		// exited (a loss), twice after a spec change (a drift), and after
		// a docker rm -f by hand.
		for round := 0; round < 4; round++ {
			switch round {
			case 1:
				Expect(exec.Command("docker", "kill", getSandbox(ctx, sbx)(Default).Status.ContainerName).Run()).To(Succeed())
			case 2, 3:
				Eventually(func(g Gomega) {
					got := getSandbox(ctx, sbx)(g)
					got.Spec.Resources.Pids = int64(100 + round) // a drift
					g.Expect(k8sClient.Update(ctx, got)).To(Succeed())
				}).Should(Succeed())
			}
			if round == 3 {
				Eventually(func(g Gomega) {
					got := getSandbox(ctx, sbx)(g)
					g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
					g.Expect(got.Status.ContainerID).NotTo(Equal(id))
				}, "60s").Should(Succeed())
				id = getSandbox(ctx, sbx)(Default).Status.ContainerID
				Expect(exec.Command("docker", "rm", "-f", id).Run()).To(Succeed())
			}
			Eventually(func(g Gomega) {
				got := getSandbox(ctx, sbx)(g)
				g.Expect(got.Status.ContainerID).NotTo(BeEmpty())
				g.Expect(got.Status.ContainerID).NotTo(Equal(id))
				g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, afev1.SandboxReadyCondition)).To(BeTrue())
			}, "90s").Should(Succeed())
			name := getSandbox(ctx, sbx)(Default).Status.ContainerName
			c, err := dockertest.Inspect(name)
			Expect(err).NotTo(HaveOccurred())
			id = c.ID
			Expect(volumeAt(name)).To(Equal(want), "round %d: /data is the sandbox's named volume, not an anonymous one", round)
			Expect(labelsOf(want)).To(HaveKeyWithValue(afev1.LabelSandboxUID, string(sbx.UID)))
			Expect(labelsOf(want)).To(HaveKeyWithValue(afev1.LabelRole, afev1.RoleImageVolume))
			Expect(asRoot(name, "ls /data")).To(BeEmpty(), "round %d: a fresh volume, as the engine's anonymous one was", round)
			Expect(asRoot(name, "touch /data/round")).Error().NotTo(HaveOccurred())
		}
		deleteAndWaitGone(ctx, sbx)
		Expect(exec.Command("docker", "volume", "inspect", want).Run()).To(HaveOccurred(), "removed with the sandbox")
	})
})
