package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/controllers/pool"
	"afe.dev/sandbox/controllers/sandbox"
	"afe.dev/sandbox/internal/naming"
	"afe.dev/sandbox/test/dockertest"
)

// The manager built with the tag crashpoints kills itself with SIGKILL at
// the point AFE_CRASHPOINT names (internal/crashpoint): between two writes
// of a claim, or of a member's creation. The manager as shipped, started
// after it, must converge from what the engine shows.
var _ = Describe("Warm pools across a real crash", func() {
	It("converge after a SIGKILL between the steps of a claim or of a member's making: one member claimed once, nothing leaked", func() {
		crashing := os.Getenv("AFE_MANAGER_CRASHPOINTS_BIN") // make test builds it beforehand
		if crashing == "" {
			var err error
			crashing, err = gexec.Build("afe.dev/sandbox/cmd/manager", "-tags", "crashpoints")
			Expect(err).NotTo(HaveOccurred())
		}
		own := newOwnCluster()
		inst := fmt.Sprintf("e2e-pool-crash-%d", os.Getpid())
		label := afev1.LabelController + "=" + inst
		defer dockertest.RemoveAll(label)
		var mgr *gexec.Session
		start := func(bin, point string) {
			cmd := exec.Command(bin, "--instance", inst, "--metrics-bind-address", "0", "--health-probe-bind-address", "0")
			cmd.Env = append(os.Environ(), "KUBECONFIG="+own.Kubeconfig, "AFE_CRASHPOINT="+point)
			var err error
			mgr, err = gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
			Expect(err).NotTo(HaveOccurred())
		}
		defer func() { stopManager(mgr) }()
		killedAt := func(point string) {
			Eventually(mgr, 90*time.Second).Should(gexec.Exit(), "the manager reaches %s", point)
			Expect(mgr.ExitCode()).To(Equal(128+int(syscall.SIGKILL)), "killed by its signal at %s", point)
			objects, _ := dockertest.Objects(label)
			GinkgoWriter.Printf("on the engine when killed at %s: %v\n", point, objects)
		}
		template := "image: afe/busybox:dev\n    resources: {cpu: 500m, memory: 64Mi, pids: 64}"
		own.kubectl(fmt.Sprintf("apiVersion: sandbox.afe.dev/v1alpha1\nkind: SandboxPool\nmetadata: {name: warm}\nspec:\n  replicas: 1\n  template:\n    %s\n", template),
			"apply", "-f", "-")
		poolReady := own.get("sandboxpool/warm", "{.status.ready}")

		for i, point := range []string{sandbox.CrashClaimRecorded, sandbox.CrashClaimRenamed} {
			By("killing the manager at " + point)
			start(crashing, point)
			Eventually(poolReady, time.Minute).Should(Equal("1/1"))
			name := fmt.Sprintf("claimant-%d", i)
			own.kubectl(fmt.Sprintf("apiVersion: sandbox.afe.dev/v1alpha1\nkind: Sandbox\nmetadata: {name: %s}\nspec:\n  poolRef: {name: warm}\n  %s\n",
				name, strings.ReplaceAll(template, "\n    ", "\n  ")), "apply", "-f", "-")
			killedAt(point)

			By("converging with the manager as shipped")
			start(managerBin, "")
			Eventually(own.get("sandbox/"+name, "{.status.phase} {.status.pool}"), time.Minute).Should(Equal("Ready warm"))
			c, err := dockertest.Inspect(naming.Container(naming.Key("default", name)))
			Expect(err).NotTo(HaveOccurred())
			Expect(c.Config.Labels).To(HaveKeyWithValue(afev1.LabelRole, afev1.RoleMember))
			Expect(own.get("sandbox/"+name, "{.status.containerID}")()).To(Equal(c.ID))
			Eventually(poolReady, time.Minute).Should(Equal("1/1"), "refilled")
			expectMembersOnce(label, i+1)
			stopManager(mgr)
		}

		By("killing the manager at " + sandbox.CrashClaimStatusWritten + ", then deleting the Sandbox, which has no finalizer yet")
		start(crashing, sandbox.CrashClaimStatusWritten)
		Eventually(poolReady, time.Minute).Should(Equal("1/1"))
		own.kubectl(fmt.Sprintf("apiVersion: sandbox.afe.dev/v1alpha1\nkind: Sandbox\nmetadata: {name: unfinalized}\nspec:\n  poolRef: {name: warm}\n  %s\n",
			strings.ReplaceAll(template, "\n    ", "\n  ")), "apply", "-f", "-")
		killedAt(sandbox.CrashClaimStatusWritten)
		Expect(own.get("sandbox/unfinalized", "{.status.phase} {.status.pool} {.metadata.finalizers}")()).To(Equal("Ready warm"),
			"Ready from the pool before its finalizer is written")
		own.kubectl("", "delete", "sandbox/unfinalized", "--timeout=10s")
		start(managerBin, "")
		unfinalized := naming.Key("default", "unfinalized")
		Eventually(func() []string {
			return append(dockerLines("ps", "-aq", "--filter", "name=^"+naming.Container(unfinalized)+"$"),
				dockerLines("volume", "ls", "-q", "--filter", "name=^"+naming.Claim(unfinalized)+"$")...)
		}, time.Minute).Should(BeEmpty(), "the sweep removes the member and the record of a Sandbox gone without its finalizer")
		Eventually(poolReady, time.Minute).Should(Equal("1/1"), "refilled")
		expectMembersOnce(label, 2)
		Expect(own.get("sandbox/claimant-0", "{.metadata.finalizers}")()).To(ContainSubstring(afev1.SandboxFinalizer),
			"a claimed Sandbox is given its finalizer after its status")
		stopManager(mgr)

		By("killing the manager at " + sandbox.CrashProxyRenamed + ", a claim of a member with egress")
		start(crashing, sandbox.CrashProxyRenamed)
		egress := template + "\n    egress: [allowed.test]"
		own.kubectl(fmt.Sprintf("apiVersion: sandbox.afe.dev/v1alpha1\nkind: SandboxPool\nmetadata: {name: warm-egress}\nspec:\n  replicas: 1\n  template:\n    %s\n", egress),
			"apply", "-f", "-")
		Eventually(own.get("sandboxpool/warm-egress", "{.status.ready}"), time.Minute).Should(Equal("1/1"))
		own.kubectl(fmt.Sprintf("apiVersion: sandbox.afe.dev/v1alpha1\nkind: Sandbox\nmetadata: {name: claimant-egress}\nspec:\n  poolRef: {name: warm-egress}\n  %s\n",
			strings.ReplaceAll(egress, "\n    ", "\n  ")), "apply", "-f", "-")
		killedAt(sandbox.CrashProxyRenamed)
		start(managerBin, "")
		Eventually(own.get("sandbox/claimant-egress", "{.status.phase} {.status.pool}"), time.Minute).Should(Equal("Ready warm-egress"))
		Expect(own.get("sandbox/claimant-egress", `{.status.conditions[?(@.type=="EgressReady")].status}`)()).To(Equal("True"))
		key := naming.Key("default", "claimant-egress")
		c, err := dockertest.Inspect(naming.Container(key))
		Expect(err).NotTo(HaveOccurred())
		proxy, err := dockertest.Inspect(naming.Proxy(key))
		Expect(err).NotTo(HaveOccurred())
		Expect(proxy.Config.Labels).To(HaveKeyWithValue(afev1.LabelMemberName, c.Config.Labels[afev1.LabelMemberName]), "its member's proxy")
		Eventually(own.get("sandboxpool/warm-egress", "{.status.ready}"), time.Minute).Should(Equal("1/1"), "refilled")
		expectMembersOnce(label, 3)
		stopManager(mgr)

		By("killing the manager at " + pool.CrashMemberVolumeMade)
		start(crashing, pool.CrashMemberVolumeMade)
		own.kubectl("", "patch", "sandboxpool/warm", "--type=merge", "-p", `{"spec":{"replicas":2}}`)
		killedAt(pool.CrashMemberVolumeMade)
		start(managerBin, "")
		Eventually(poolReady, time.Minute).Should(Equal("2/2"))
		expectMembersOnce(label, 3)

		By("leaving nothing once the Sandboxes and the pool are deleted")
		own.kubectl("", "delete", "sandboxes", "--all", "--timeout=60s")
		own.kubectl("", "delete", "sandboxpool/warm", "sandboxpool/warm-egress", "--timeout=60s")
		Eventually(func() ([]string, error) { return dockertest.Objects(label) }, time.Minute).Should(BeEmpty())
	})
})

// expectMembersOnce checks the pool's members on the engine: claimed ones
// each bound by one claim record, none of them under two names, and no
// member workspace without its member. The pool controller runs on: a
// member in the making has its workspace before its container, so the
// engine is looked at until it shows all of this (a minute at most).
func expectMembersOnce(label string, claimed int) {
	EventuallyWithOffset(1, func(g Gomega) {
		members := map[string]int{}
		bound := 0
		for _, line := range dockerLines("ps", "-a", "--filter", "label="+label, "--filter", "label="+afev1.LabelRole+"="+afev1.RoleMember,
			"--format", `{{.Names}} {{.Label "`+afev1.LabelMemberName+`"}}`) {
			f := strings.Fields(line)
			g.Expect(f).To(HaveLen(2), line)
			members[f[1]]++
			if f[0] != f[1] {
				bound++
			}
		}
		for name, n := range members {
			g.Expect(n).To(Equal(1), "member %s is one container", name)
		}
		g.Expect(bound).To(Equal(claimed), "claimed members: %v", members)
		proxies := map[string]int{}
		for _, m := range dockerLines("ps", "-a", "--filter", "label="+label, "--filter", "label="+afev1.LabelRole+"="+afev1.RoleProxy,
			"--format", `{{.Label "`+afev1.LabelMemberName+`"}}`) {
			proxies[m]++
			g.Expect(members).To(HaveKey(m), "the proxy of member %s has its member", m)
			g.Expect(proxies[m]).To(Equal(1), "member %s has one proxy", m)
		}
		records := dockerLines("volume", "ls", "-q", "--filter", "label="+label, "--filter", "label="+afev1.LabelRole+"="+afev1.RoleClaim)
		g.Expect(records).To(HaveLen(claimed), "one claim record per claimed member")
		for _, v := range dockerLines("volume", "ls", "--filter", "label="+label, "--filter", "label="+afev1.LabelRole+"="+afev1.RoleWorkspace,
			"--format", `{{.Label "`+afev1.LabelMemberName+`"}}`) {
			if v != "" {
				g.Expect(members).To(HaveKey(v), "the workspace of member %s has its member", v)
			}
		}
	}, time.Minute, time.Second).Should(Succeed())
}

// dockerLines runs the docker CLI and returns its output's lines.
func dockerLines(args ...string) []string {
	out, err := exec.Command("docker", args...).CombinedOutput()
	ExpectWithOffset(2, err).NotTo(HaveOccurred(), "docker %s: %s", strings.Join(args, " "), out)
	var lines []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line != "" {
			lines = append(lines, line)
		}
	}
	return lines
}
