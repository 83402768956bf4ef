package controllers

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/sandboxspec"
	"afe.dev/sandbox/test/dockertest"
	"afe.dev/sandbox/test/kubetest"
)

// newNamespace creates a namespace for one test. Namespaces never finish
// deleting without kube-controller-manager, so they are left in place.
func newNamespace(ctx context.Context) string {
	return kubetest.NewNamespace(ctx, k8sClient, fmt.Sprintf("t%d-", os.Getpid()))
}

func newSandbox(ns, name string) *afev1.Sandbox {
	return &afev1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: afev1.SandboxSpec{SandboxTemplateSpec: afev1.SandboxTemplateSpec{
			Image: dockertest.TestImage,
			Resources: afev1.SandboxResources{
				CPU: ptr.To(resource.MustParse("500m")), Memory: ptr.To(resource.MustParse("128Mi")), Pids: 64,
			},
		}},
	}
}

func getSandbox(ctx context.Context, sbx *afev1.Sandbox) func(Gomega) *afev1.Sandbox {
	return kubetest.GetSandbox(ctx, k8sClient, sbx)
}

func waitReady(ctx context.Context, sbx *afev1.Sandbox) *afev1.Sandbox {
	return kubetest.WaitReady(ctx, k8sClient, sbx)
}

// waitCondition waits for a condition with the given status and reason.
func waitCondition(ctx context.Context, sbx *afev1.Sandbox, condType string, status metav1.ConditionStatus, reason string) *metav1.Condition {
	got := kubetest.WaitCondition(ctx, k8sClient, sbx, condType, status, reason)
	return meta.FindStatusCondition(got.Status.Conditions, condType)
}

func uidLabel(sbx *afev1.Sandbox) string {
	got := &afev1.Sandbox{}
	Expect(k8sClient.Get(context.Background(), client.ObjectKeyFromObject(sbx), got)).To(Succeed())
	return afev1.LabelSandboxUID + "=" + string(got.UID)
}

func deleteAndWaitGone(ctx context.Context, sbx *afev1.Sandbox) {
	Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, sbx))).To(Succeed())
	Eventually(func() bool {
		return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(sbx), &afev1.Sandbox{}))
	}).Should(BeTrue())
}

var _ = Describe("Sandbox", func() {
	var ctx context.Context
	var ns string
	BeforeEach(func() {
		ctx = context.Background()
		ns = newNamespace(ctx)
	})

	It("runs a hardened container, recreates it on drift keeping the workspace, and removes everything on delete", func() {
		sbx := newSandbox(ns, "hardened")
		sbx.Spec.Env = []afev1.EnvVar{{Name: "GREETING", Value: "hello"}}
		t0 := time.Now()
		Expect(k8sClient.Create(ctx, sbx)).To(Succeed())
		got := waitReady(ctx, sbx)
		GinkgoWriter.Printf("sandbox creation to Ready: %s\n", time.Since(t0))
		label := uidLabel(sbx)

		By("defaulting the spec and reporting names in the status")
		Expect(got.Spec.User).To(BeEmpty(), "unset: the controller allocates an id (issue 27)")
		Expect(got.Spec.Scope).To(Equal("main"))
		Expect(got.Spec.TimeoutSeconds).To(Equal(int32(600)))
		Expect(got.Status.ContainerName).To(Equal("afe-" + ns + ".hardened"))
		Expect(got.Status.VolumeName).To(Equal("afe-" + ns + ".hardened_ws"))
		Expect(got.Status.ReadyTime).NotTo(BeNil())
		Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		Expect(got.Finalizers).To(ContainElement(afev1.SandboxFinalizer))

		By("inspecting the container")
		c, err := dockertest.Inspect(got.Status.ContainerName)
		Expect(err).NotTo(HaveOccurred())
		Expect(c.ID).To(Equal(got.Status.ContainerID))
		Expect(c.State.Running).To(BeTrue())
		Expect(c.HostConfig.CapDrop).To(Equal([]string{"ALL"}))
		Expect(c.HostConfig.CapAdd).To(BeEmpty())
		Expect(c.HostConfig.Privileged).To(BeFalse())
		Expect(c.HostConfig.SecurityOpt).To(ContainElement("no-new-privileges:true"))
		Expect(c.Config.User).To(Equal(c.Config.Labels[afev1.LabelUser]), "the id allocated to it")
		_, err = sandboxspec.ValidateAllocated(c.Config.User, sandboxspec.Options{})
		Expect(err).NotTo(HaveOccurred())
		Expect(c.HostConfig.NetworkMode).To(Equal("none"))
		Expect(c.HostConfig.Memory).To(Equal(int64(128 << 20)))
		Expect(c.HostConfig.MemorySwap).To(Equal(c.HostConfig.Memory), "swap must be off")
		Expect(c.HostConfig.NanoCpus).To(Equal(int64(500_000_000)))
		Expect(*c.HostConfig.PidsLimit).To(Equal(int64(64)))
		Expect(*c.HostConfig.Init).To(BeTrue())
		Expect(c.HostConfig.Binds).To(BeEmpty())
		Expect(c.Mounts).To(HaveLen(1))
		Expect(c.Mounts[0].Destination).To(Equal("/workspace"))
		Expect(c.Mounts[0].Type).To(Equal("volume"))
		Expect(c.Mounts[0].Name).To(Equal(got.Status.VolumeName))
		Expect(c.Config.Env).To(ConsistOf("PATH=/bin"), "the image's only: the declared env is given to each command executed in it")
		Expect(c.Config.Labels).To(HaveKeyWithValue(afev1.LabelTicket, "hardened"))
		Expect(c.Config.Labels).To(HaveKeyWithValue(afev1.LabelNamespace, ns))
		Expect(c.Config.Labels).To(HaveKeyWithValue(afev1.LabelSandbox, "hardened"))
		Expect(c.Config.Labels).To(HaveKeyWithValue(afev1.LabelSandboxUID, string(got.UID)))
		Expect(c.Config.Labels).To(HaveKeyWithValue(afev1.LabelScope, "main"))
		Expect(c.Config.Labels).To(HaveKeyWithValue(afev1.LabelRole, afev1.RoleSandbox))
		Expect(c.Config.Labels).To(HaveKeyWithValue(afev1.LabelController, instance))
		Expect(c.Config.Labels).To(HaveKey(afev1.LabelSpecHash))
		out, err := dockertest.Exec(c.Name, "id", "-u")
		Expect(err).NotTo(HaveOccurred())
		Expect(c.Config.User).To(HavePrefix(out+":"), "the allocated uid")
		out, err = dockertest.Exec(c.Name, "sh", "-c", "grep CapEff /proc/self/status")
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(HaveSuffix("0000000000000000"))

		By("changing the spec: the container is recreated and the workspace kept")
		_, err = dockertest.Exec(c.Name, "sh", "-c", "echo kept > /workspace/note")
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			cur := getSandbox(ctx, sbx)(g)
			cur.Spec.Resources.Memory = ptr.To(resource.MustParse("96Mi"))
			g.Expect(k8sClient.Update(ctx, cur)).To(Succeed())
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			cur := getSandbox(ctx, sbx)(g)
			g.Expect(cur.Status.ContainerID).NotTo(Equal(c.ID))
			g.Expect(cur.Status.Phase).To(Equal(afev1.SandboxReady))
			g.Expect(cur.Status.ObservedGeneration).To(Equal(cur.Generation))
		}).Should(Succeed())
		c2, err := dockertest.Inspect(got.Status.ContainerName)
		Expect(err).NotTo(HaveOccurred())
		Expect(c2.HostConfig.Memory).To(Equal(int64(96 << 20)))
		Expect(c2.Config.Labels[afev1.LabelSpecHash]).NotTo(Equal(c.Config.Labels[afev1.LabelSpecHash]))
		out, err = dockertest.Exec(c2.Name, "cat", "/workspace/note")
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(Equal("kept"))
		Expect(getSandbox(ctx, sbx)(Default).Status.Recreations).To(BeZero(), "drift is not a loss")

		By("deleting: nothing labelled is left")
		deleteAndWaitGone(ctx, sbx)
		Expect(dockertest.Objects(label)).To(BeEmpty())
	})

	It("recreates a lost container with a fresh workspace", func() {
		sbx := newSandbox(ns, "lost")
		Expect(k8sClient.Create(ctx, sbx)).To(Succeed())
		got := waitReady(ctx, sbx)
		_, err := dockertest.Exec(got.Status.ContainerName, "sh", "-c", "echo old > /workspace/note")
		Expect(err).NotTo(HaveOccurred())

		removed := time.Now()
		Expect(dockertest.RemoveContainer(got.Status.ContainerName)).To(Succeed())
		Eventually(func(g Gomega) {
			cur := getSandbox(ctx, sbx)(g)
			g.Expect(cur.Status.Recreations).To(Equal(int32(1)))
			g.Expect(cur.Status.LastLostTime).NotTo(BeNil())
			g.Expect(cur.Status.Phase).To(Equal(afev1.SandboxReady))
			g.Expect(cur.Status.ContainerID).NotTo(Equal(got.Status.ContainerID))
		}).Should(Succeed())
		GinkgoWriter.Printf("lost container replaced after %s\n", time.Since(removed))
		out, _ := dockertest.Exec(got.Status.ContainerName, "ls", "-A", "/workspace")
		Expect(out).To(BeEmpty(), "the workspace is fresh")
		Eventually(func(g Gomega) {
			list := &corev1.EventList{}
			g.Expect(k8sClient.List(ctx, list, client.InNamespace(ns))).To(Succeed())
			var reasons []string
			for _, e := range list.Items {
				reasons = append(reasons, e.Reason)
			}
			g.Expect(reasons).To(ContainElement(afev1.SandboxLostReason))
		}).Should(Succeed())
		deleteAndWaitGone(ctx, sbx)
	})

	It("spaces the recreations of a container that keeps exiting at once", func() {
		sbx := newSandbox(ns, "crashloop")
		sbx.Spec.Command = []string{"sh", "-c", "exit 3"}
		Expect(k8sClient.Create(ctx, sbx)).To(Succeed())
		label := uidLabel(sbx)
		Eventually(func(g Gomega) {
			g.Expect(getSandbox(ctx, sbx)(g).Status.Recreations).To(BeNumerically(">=", 2))
		}).Should(Succeed())
		// Unspaced, a container that exits at once is recreated about every
		// second; spaced, the third recreation waits 10 s and the fourth 20.
		Consistently(func(g Gomega) {
			g.Expect(getSandbox(ctx, sbx)(g).Status.Recreations).To(BeNumerically("<=", 3))
		}, "15s", "1s").Should(Succeed())
		// Between a recreation's start and its exit the container is
		// briefly Ready: the back-off is what the condition says once it
		// exited again.
		Eventually(func(g Gomega) {
			c := meta.FindStatusCondition(getSandbox(ctx, sbx)(g).Status.Conditions, afev1.ContainerReadyCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(afev1.SandboxLostReason))
			g.Expect(c.Message).To(ContainSubstring("crash-loop back-off"))
		}, "15s").Should(Succeed())
		deleteAndWaitGone(ctx, sbx)
		Expect(dockertest.Objects(label)).To(BeEmpty())
	})

	It("idles on an image with nothing but /bin/sh", func() {
		skip, err := dockertest.RequireImage(dockertest.ShellOnlyImage)
		Expect(err).NotTo(HaveOccurred())
		if skip != "" {
			Skip(skip)
		}
		sbx := newSandbox(ns, "bare")
		sbx.Spec.Image = dockertest.ShellOnlyImage
		Expect(k8sClient.Create(ctx, sbx)).To(Succeed())
		got := waitReady(ctx, sbx)
		c, err := dockertest.Inspect(got.Status.ContainerName)
		Expect(err).NotTo(HaveOccurred())
		Expect(c.Config.OpenStdin).To(BeTrue(), "the keep-alive blocks on the stdin the engine holds")
		// Without sleep in the image, a keep-alive that needed it would spin
		// at the CPU limit (500m here).
		Consistently(func(g Gomega) {
			out, err := exec.Command("docker", "stats", "--no-stream", "--format", "{{.CPUPerc}}", got.Status.ContainerName).Output()
			g.Expect(err).NotTo(HaveOccurred())
			cpu, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(string(out)), "%"), 64)
			g.Expect(err).NotTo(HaveOccurred(), string(out))
			g.Expect(cpu).To(BeNumerically("<", 10), "CPU %% of the idle sandbox")
		}, "6s", "2s").Should(Succeed())
		Expect(getSandbox(ctx, sbx)(Default).Status.Recreations).To(BeZero())
		deleteAndWaitGone(ctx, sbx)
	})

	It("mounts a Folder workspace inside --workspace-root and never deletes it", func() {
		dir := filepath.Join(workspaceRoot, ns, "ws")
		Expect(os.MkdirAll(dir, 0o777)).To(Succeed())
		Expect(os.Chmod(dir, 0o777)).To(Succeed())
		sbx := newSandbox(ns, "folder")
		sbx.Spec.Workspace = afev1.WorkspaceSpec{Type: afev1.WorkspaceFolder, HostPath: dir}
		Expect(k8sClient.Create(ctx, sbx)).To(Succeed())
		got := waitReady(ctx, sbx)
		Expect(got.Status.VolumeName).To(BeEmpty())
		c, err := dockertest.Inspect(got.Status.ContainerName)
		Expect(err).NotTo(HaveOccurred())
		Expect(c.Mounts).To(HaveLen(1))
		Expect(c.Mounts[0].Type).To(Equal("bind"))
		Expect(c.Mounts[0].Destination).To(Equal("/workspace"))
		_, err = dockertest.Exec(c.Name, "sh", "-c", "echo from-sandbox > /workspace/f")
		Expect(err).NotTo(HaveOccurred())
		Expect(os.ReadFile(filepath.Join(dir, "f"))).To(Equal([]byte("from-sandbox\n")))
		label := uidLabel(sbx)
		deleteAndWaitGone(ctx, sbx)
		Expect(dockertest.Objects(label)).To(BeEmpty())
		Expect(filepath.Join(dir, "f")).To(BeAnExistingFile())
	})

	It("passes Secret values into the container of a sandbox with its own command, and to its Runs", func() {
		Expect(k8sClient.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"},
			Data:       map[string][]byte{"token": []byte("s3cr3t")},
		})).To(Succeed())
		sbx := newSandbox(ns, "secret-env")
		sbx.Spec.Command = []string{"/bin/sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"}
		sbx.Spec.Env = []afev1.EnvVar{{Name: "API_TOKEN", ValueFrom: &afev1.EnvVarSource{SecretKeyRef: &afev1.SecretKeySelector{Name: "creds", Key: "token"}}}}
		Expect(k8sClient.Create(ctx, sbx)).To(Succeed())
		got := waitReady(ctx, sbx)
		out, err := dockertest.Exec(got.Status.ContainerName, "sh", "-c", "tr '\\0' '\\n' < /proc/1/environ | grep API_TOKEN")
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(Equal("API_TOKEN=s3cr3t"), "its command sees it from its start")
		run := newRun(ns, "token", sbx.Name)
		run.Spec.Script = `printf %s "$API_TOKEN"`
		Expect(k8sClient.Create(ctx, run)).To(Succeed())
		Expect(waitRunPhase(ctx, run, afev1.RunCompleted).Status.Output).To(Equal("s3cr3t"))
		deleteAndWaitGone(ctx, sbx)
	})

	DescribeTable("refuses an invalid spec with a condition and creates nothing",
		func(mutate func(ns string, s *afev1.Sandbox), condType, reason, messagePart string) {
			sbx := newSandbox(ns, "invalid")
			mutate(ns, sbx)
			Expect(k8sClient.Create(ctx, sbx)).To(Succeed())
			c := waitCondition(ctx, sbx, condType, metav1.ConditionFalse, reason)
			Expect(c.Message).To(ContainSubstring(messagePart))
			got := getSandbox(ctx, sbx)(Default)
			Expect(got.Status.Phase).To(Equal(afev1.SandboxFailed))
			ready := meta.FindStatusCondition(got.Status.Conditions, afev1.SandboxReadyCondition)
			Expect(ready.Reason).To(Equal(reason))
			label := uidLabel(sbx)
			Consistently(func() ([]string, error) { return dockertest.Objects(label) }, "2s").Should(BeEmpty())
			deleteAndWaitGone(ctx, sbx)
		},
		Entry("a denied env name", func(_ string, s *afev1.Sandbox) {
			s.Spec.Env = []afev1.EnvVar{{Name: "DOCKER_HOST", Value: "unix:///var/run/docker.sock"}}
		}, afev1.ContainerReadyCondition, afev1.DeniedEnvReason, "DOCKER_HOST"),
		Entry("a name on --deny-env", func(_ string, s *afev1.Sandbox) {
			s.Spec.Env = []afev1.EnvVar{{Name: "EXTRA_DENIED", Value: "x"}}
		}, afev1.ContainerReadyCondition, afev1.DeniedEnvReason, "EXTRA_DENIED"),
		Entry("a missing Secret", func(_ string, s *afev1.Sandbox) {
			s.Spec.Env = []afev1.EnvVar{{Name: "T", ValueFrom: &afev1.EnvVarSource{SecretKeyRef: &afev1.SecretKeySelector{Name: "nope", Key: "k"}}}}
		}, afev1.ContainerReadyCondition, afev1.SecretNotFoundReason, "Secret nope does not exist"),
		Entry("a Folder outside --workspace-root", func(_ string, s *afev1.Sandbox) {
			s.Spec.Workspace = afev1.WorkspaceSpec{Type: afev1.WorkspaceFolder, HostPath: os.TempDir()}
		}, afev1.WorkspaceReadyCondition, afev1.WorkspaceOutsideRootReason, "not inside"),
		Entry("a Folder reached through a symlink out of the root", func(ns string, s *afev1.Sandbox) {
			link := filepath.Join(workspaceRoot, ns, "escape")
			Expect(os.MkdirAll(filepath.Dir(link), 0o755)).To(Succeed())
			Expect(os.Symlink("/etc", link)).To(Succeed())
			s.Spec.Workspace = afev1.WorkspaceSpec{Type: afev1.WorkspaceFolder, HostPath: link}
		}, afev1.WorkspaceReadyCondition, afev1.WorkspaceSymlinkReason, "symbolic link"),
		Entry("a Folder in another namespace's folder", func(_ string, s *afev1.Sandbox) {
			dir := filepath.Join(workspaceRoot, "other-namespace", "ws")
			Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
			s.Spec.Workspace = afev1.WorkspaceSpec{Type: afev1.WorkspaceFolder, HostPath: dir}
		}, afev1.WorkspaceReadyCondition, afev1.WorkspaceOutsideRootReason, "may only use folders under"),
		Entry("the namespace's folder itself", func(ns string, s *afev1.Sandbox) {
			s.Spec.Workspace = afev1.WorkspaceSpec{Type: afev1.WorkspaceFolder, HostPath: filepath.Join(workspaceRoot, ns)}
		}, afev1.WorkspaceReadyCondition, afev1.WorkspaceOutsideRootReason, "the folder of namespace"),
		Entry("the Docker socket as a Folder", func(_ string, s *afev1.Sandbox) {
			s.Spec.Workspace = afev1.WorkspaceSpec{Type: afev1.WorkspaceFolder, HostPath: "/var/run/docker.sock"}
		}, afev1.WorkspaceReadyCondition, afev1.WorkspaceOutsideRootReason, "not inside"),
	)

	It("reports a missing Secret key and recovers when the key appears", func() {
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "partial"}, Data: map[string][]byte{"other": []byte("x")}}
		Expect(k8sClient.Create(ctx, secret)).To(Succeed())
		sbx := newSandbox(ns, "late-secret")
		sbx.Spec.Env = []afev1.EnvVar{{Name: "T", ValueFrom: &afev1.EnvVarSource{SecretKeyRef: &afev1.SecretKeySelector{Name: "partial", Key: "k"}}}}
		Expect(k8sClient.Create(ctx, sbx)).To(Succeed())
		c := waitCondition(ctx, sbx, afev1.ContainerReadyCondition, metav1.ConditionFalse, afev1.SecretNotFoundReason)
		Expect(c.Message).To(ContainSubstring("has no key k"))
		Expect(dockertest.Objects(uidLabel(sbx))).To(BeEmpty())
		secret.Data["k"] = []byte("v")
		Expect(k8sClient.Update(ctx, secret)).To(Succeed())
		waitReady(ctx, sbx)
		deleteAndWaitGone(ctx, sbx)
	})

	It("reports an image that cannot be pulled, and retries until it is there", func() {
		// A registry address nothing listens on (loopback): every pull fails.
		image := fmt.Sprintf("127.0.0.1:1/afe/missing-%d:never", GinkgoParallelProcess())
		sbx := newSandbox(ns, "no-image")
		sbx.Spec.Image = image
		Expect(k8sClient.Create(ctx, sbx)).To(Succeed())
		c := waitCondition(ctx, sbx, afev1.ContainerReadyCondition, metav1.ConditionFalse, afev1.ImagePullFailedReason)
		Expect(c.Message).To(ContainSubstring("could not be pulled"))
		Expect(getSandbox(ctx, sbx)(Default).Status.Phase).To(Equal(afev1.SandboxPending))
		label := uidLabel(sbx)
		Expect(dockertest.Objects(label)).To(ConsistOf(HavePrefix("volume/")), "only the workspace exists")

		By("keeping a Run Pending while the sandbox exists but is not Ready")
		run := newRun(ns, "early", sbx.Name)
		run.Spec.Command = []string{"echo", `{"ran": true}`}
		Expect(k8sClient.Create(ctx, run)).To(Succeed())
		pending := waitRunPhase(ctx, run, afev1.RunPending)
		Expect(findCondition(pending.Status.Conditions, afev1.RunSandboxReadyCondition).Message).To(ContainSubstring("is not Ready"))

		By("retrying: once the image is present, the sandbox comes up and the Run runs")
		Expect(exec.Command("docker", "tag", dockertest.TestImage, image).Run()).To(Succeed())
		defer func() { _ = exec.Command("docker", "rmi", image).Run() }()
		waitReady(ctx, sbx)
		done := waitRunPhase(ctx, run, afev1.RunCompleted)
		Expect(string(done.Status.Result["ran"].Raw)).To(Equal("true"))
		deleteAndWaitGone(ctx, sbx)
		Expect(dockertest.Objects(label)).To(BeEmpty())
	})

	DescribeTable("admission refuses",
		func(mutate func(s *afev1.Sandbox), messagePart string) {
			sbx := newSandbox(ns, "refused")
			mutate(sbx)
			err := k8sClient.Create(ctx, sbx)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
			Expect(err.Error()).To(ContainSubstring(messagePart))
		},
		Entry("uid 0", func(s *afev1.Sandbox) { s.Spec.User = "0" }, "non-root"),
		Entry("uid 00", func(s *afev1.Sandbox) { s.Spec.User = "00" }, "non-root"),
		Entry("0:0", func(s *afev1.Sandbox) { s.Spec.User = "0:0" }, "non-root"),
		Entry("root", func(s *afev1.Sandbox) { s.Spec.User = "root" }, "non-root"),
		Entry("an IP literal in egress", func(s *afev1.Sandbox) { s.Spec.Egress = []afev1.EgressHost{"10.1.2.3"} }, "spec.egress"),
		Entry("a port in egress", func(s *afev1.Sandbox) { s.Spec.Egress = []afev1.EgressHost{"example.com:443"} }, "spec.egress"),
		Entry("a wildcard in egress", func(s *afev1.Sandbox) { s.Spec.Egress = []afev1.EgressHost{"*.example.com"} }, "spec.egress"),
		Entry("a scheme in egress", func(s *afev1.Sandbox) { s.Spec.Egress = []afev1.EgressHost{"https://example.com"} }, "spec.egress"),
		Entry("hostPath on a Volume", func(s *afev1.Sandbox) { s.Spec.Workspace.HostPath = "/srv" }, "hostPath"),
		Entry("a Folder without hostPath", func(s *afev1.Sandbox) { s.Spec.Workspace.Type = afev1.WorkspaceFolder }, "hostPath"),
		Entry("both value and valueFrom", func(s *afev1.Sandbox) {
			s.Spec.Env = []afev1.EnvVar{{Name: "A", Value: "1", ValueFrom: &afev1.EnvVarSource{SecretKeyRef: &afev1.SecretKeySelector{Name: "s", Key: "k"}}}}
		}, "not both"),
		Entry("a Secret name that is a path", func(s *afev1.Sandbox) {
			s.Spec.Env = []afev1.EnvVar{{Name: "A", ValueFrom: &afev1.EnvVarSource{SecretKeyRef: &afev1.SecretKeySelector{Name: "../other/s", Key: "k"}}}}
		}, "secretKeyRef.name"),
		Entry("a disk limit on a Folder workspace", func(s *afev1.Sandbox) {
			s.Spec.Resources.Disk = ptr.To(resource.MustParse("1Gi"))
			s.Spec.Workspace = afev1.WorkspaceSpec{Type: afev1.WorkspaceFolder, HostPath: "/srv/x"}
		}, "resources.disk is not enforced on a Folder workspace"),
		Entry("a bad env name", func(s *afev1.Sandbox) { s.Spec.Env = []afev1.EnvVar{{Name: "A=B", Value: "1"}} }, "spec.env"),
		Entry("zero memory", func(s *afev1.Sandbox) { s.Spec.Resources.Memory = ptr.To(resource.MustParse("0")) }, "memory"),
		Entry("a timeout over a day", func(s *afev1.Sandbox) { s.Spec.TimeoutSeconds = 86401 }, "timeoutSeconds"),
		Entry("an image with spaces", func(s *afev1.Sandbox) { s.Spec.Image = "busybox latest" }, "spec.image"),
	)
})
