package controllers

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/controllers/config"
	"afe.dev/sandbox/controllers/sandbox"
	"afe.dev/sandbox/internal/sandboxspec"
	"afe.dev/sandbox/test/dockertest"
)

// containerUser is the user and afe.uid label of a container, as the
// engine has them.
func containerUser(name string) (user, label string) {
	out, err := exec.Command("docker", "inspect", "-f", `{{.Config.User}} {{index .Config.Labels "`+afev1.LabelUser+`"}}`, name).CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), string(out))
	user, label, _ = strings.Cut(strings.TrimSpace(string(out)), " ")
	return user, label
}

// allocatedUser checks that the sandbox's container runs as an id of the
// default --sandbox-id-range that its label records and that owns its
// workspace, and returns it.
func allocatedUser(sbx *afev1.Sandbox) string {
	user, label := containerUser(sbx.Status.ContainerName)
	ExpectWithOffset(1, label).To(Equal(user), "the afe.uid label records the container's user")
	id, err := sandboxspec.ValidateAllocated(user, sandboxspec.Options{})
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	ExpectWithOffset(1, sandboxspec.DefaultSandboxIDs.Contains(id)).To(BeTrue())
	owner, err := inSandbox(sbx.Status.ContainerName, "stat -c %u:%g /workspace; id -u; id -g")
	ExpectWithOffset(1, err).NotTo(HaveOccurred(), owner)
	ExpectWithOffset(1, owner).To(Equal(fmt.Sprintf("%s\n%d\n%d", user, id, id)))
	return user
}

// inotifyTool builds testdata/inotify (static) once and returns its path.
var inotifyTool = sync.OnceValue(func() string {
	dir := GinkgoT().TempDir()
	bin := filepath.Join(dir, "inotify")
	build := exec.Command("go", "build", "-o", bin, "./testdata/inotify")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), string(out))
	return bin
})

var _ = Describe("Host ids of sandboxes without a user", func() {
	// Issue 27, point 10: every sandbox ran as uid 1000, so what the kernel
	// counts per user was shared by all tenants.
	It("keeps one sandbox's exhaustion of inotify instances from another namespace's sandbox", func() {
		ctx := context.Background()
		limit, err := exec.Command("cat", "/proc/sys/fs/inotify/max_user_instances").Output()
		Expect(err).NotTo(HaveOccurred())
		n := strings.TrimSpace(string(limit))
		hog, other := newSandbox(newNamespace(ctx), "inotify-hog"), newSandbox(newNamespace(ctx), "inotify-other")
		for _, s := range []*afev1.Sandbox{hog, other} {
			s.Spec.Resources.Pids = 1024
			Expect(k8sClient.Create(ctx, s)).To(Succeed())
		}
		hog, other = waitReady(ctx, hog), waitReady(ctx, other)
		defer deleteAndWaitGone(ctx, hog)
		defer deleteAndWaitGone(ctx, other)
		Expect(allocatedUser(hog)).NotTo(Equal(allocatedUser(other)))

		By("opening inotify instances in one sandbox until the kernel refuses the next (max_user_instances " + n + ")")
		bin := inotifyTool()
		for _, s := range []*afev1.Sandbox{hog, other} {
			out, err := exec.Command("docker", "cp", bin, s.Status.ContainerName+":/tmp/inotify").CombinedOutput()
			Expect(err).NotTo(HaveOccurred(), string(out))
		}
		out, err := inSandbox(hog.Status.ContainerName, "/tmp/inotify hold > /tmp/held & sleep 2; cat /tmp/held; /tmp/inotify try")
		Expect(err).To(HaveOccurred(), "the hog holds every instance its uid may have: %s", out)
		Expect(out).To(ContainSubstring("held " + n + "; the next: too many open files"))

		By("a Run in the other namespace's sandbox still getting one")
		run := newRun(other.Namespace, "inotify", other.Name)
		run.Spec.Script = "/tmp/inotify try"
		Expect(k8sClient.Create(ctx, run)).To(Succeed())
		ended := waitRunEnded(ctx, run)
		Expect(ended.Status.Output).To(ContainSubstring("inotify works"), "output: %s", ended.Status.Output)
		Expect(ended.Status.ExitCode).To(HaveValue(BeZero()))
	})

	It("gives each sandbox an id of its own, kept through a drift, a loss and a controller without memory of it", func() {
		ctx := context.Background()
		ns1, ns2 := newNamespace(ctx), newNamespace(ctx)
		sandboxes := []*afev1.Sandbox{newSandbox(ns1, "ids-a"), newSandbox(ns1, "ids-b"), newSandbox(ns2, "ids-a")}
		for _, s := range sandboxes {
			Expect(k8sClient.Create(ctx, s)).To(Succeed())
		}
		users := map[string]string{}
		for i, s := range sandboxes {
			sandboxes[i] = waitReady(ctx, s)
			defer deleteAndWaitGone(ctx, sandboxes[i])
			u := allocatedUser(sandboxes[i])
			Expect(users).NotTo(HaveKey(u), "another sandbox has %s", u)
			users[u] = s.Namespace + "/" + s.Name
		}
		a := sandboxes[0]
		user := allocatedUser(a)

		By("keeping it through a drift, with the workspace kept")
		_, err := inSandbox(a.Status.ContainerName, "echo mine > /workspace/f")
		Expect(err).NotTo(HaveOccurred())
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(a), a)).To(Succeed())
		a.Spec.Resources.Pids++ // held by the container: a drift
		Expect(k8sClient.Update(ctx, a)).To(Succeed())
		before := a.Status.ContainerID
		Eventually(func(g Gomega) {
			got := getSandbox(ctx, a)(g)
			g.Expect(got.Status.ContainerID).NotTo(BeEmpty())
			g.Expect(got.Status.ContainerID).NotTo(Equal(before))
			g.Expect(got.Status.Phase).To(Equal(afev1.SandboxReady))
		}).Should(Succeed())
		a = waitReady(ctx, a)
		Expect(allocatedUser(a)).To(Equal(user))
		out, err := inSandbox(a.Status.ContainerName, "echo more >> /workspace/f && stat -c %u /workspace/f")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(user).To(HavePrefix(out + ":"))

		By("finding it again after a loss removed every container of the sandbox")
		before = a.Status.ContainerID
		Expect(dockertest.RemoveContainer(a.Status.ContainerName)).To(Succeed())
		Eventually(func(g Gomega) {
			got := getSandbox(ctx, a)(g)
			g.Expect(got.Status.ContainerID).NotTo(BeEmpty())
			g.Expect(got.Status.ContainerID).NotTo(Equal(before))
			g.Expect(got.Status.Phase).To(Equal(afev1.SandboxReady))
		}).WithTimeout(2 * time.Minute).Should(Succeed())
		a = waitReady(ctx, a)
		Expect(allocatedUser(a)).To(Equal(user))

		By("deriving it from the engine alone: a controller that never saw these sandboxes")
		engine, skip, err := dockertest.Require()
		Expect(err).NotTo(HaveOccurred())
		Expect(skip).To(BeEmpty())
		fresh := &sandbox.Reconciler{Client: k8sClient, APIReader: k8sClient, Engine: engine, Config: config.Config{Options: Options{
			Instance: instance, AllowedUIDs: testAllowedIDs, AllowedGIDs: testAllowedIDs}}}
		for _, s := range sandboxes {
			got := getSandbox(ctx, s)(Default)
			given, ok, err := fresh.AllocatedUser(ctx, got)
			Expect(err).NotTo(HaveOccurred())
			Expect(ok).To(BeTrue())
			want, _ := containerUser(got.Status.ContainerName)
			Expect(given).To(Equal(want))
		}
		newcomer := newSandbox(ns2, "ids-new")
		newcomer.UID = "a-sandbox-not-yet-made"
		given, ok, err := fresh.AllocatedUser(ctx, newcomer)
		Expect(err).NotTo(HaveOccurred())
		Expect(ok).To(BeTrue())
		Expect(users).NotTo(HaveKey(given), "a taken id was given again")

		By("releasing it with the sandbox")
		deleteAndWaitGone(ctx, a)
		left, err := exec.Command("docker", "ps", "-aq", "--filter", "label="+afev1.LabelUser+"="+user).CombinedOutput()
		Expect(err).NotTo(HaveOccurred())
		Expect(strings.TrimSpace(string(left))).To(BeEmpty(), "no container holds %s once its sandbox is gone", user)
	})
})
