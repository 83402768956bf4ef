package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/test/dockertest"
)

// A control plane and a manager of the test's own: the suite's shared
// manager may be stopped by the specs that run before.
var _ = Describe("Builtin MergeAndCI across a crash", func() {
	It("merges again to the same commits after the manager is killed during CI", func() {
		skip, err := dockertest.RequireImage(dockertest.GitImage)
		Expect(err).NotTo(HaveOccurred())
		if skip != "" {
			Skip(skip)
		}
		own := ownControlPlane()
		defer func() { Expect(own.Stop()).To(Succeed()) }()
		inst := fmt.Sprintf("e2e-builtin-%d", os.Getpid())
		defer dockertest.RemoveAll(afev1.LabelController + "=" + inst)
		var mgr *gexec.Session
		start := func() {
			cmd := exec.Command(managerBin, "--instance", inst, "--metrics-bind-address", "0", "--health-probe-bind-address", "0")
			cmd.Env = append(os.Environ(), "KUBECONFIG="+own.Kubeconfig)
			mgr, err = gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
			Expect(err).NotTo(HaveOccurred())
		}
		start()
		defer func() { mgr.Kill(); Eventually(mgr).Should(gexec.Exit()) }()
		k := func(stdin string, args ...string) string {
			cmd := exec.Command("kubectl", append([]string{"--kubeconfig", own.Kubeconfig, "-n", "default"}, args...)...)
			cmd.Stdin = strings.NewReader(stdin)
			out, err := cmd.CombinedOutput()
			ExpectWithOffset(1, err).NotTo(HaveOccurred(), "kubectl %s: %s", strings.Join(args, " "), out)
			return strings.TrimSpace(string(out))
		}

		Expect(k(`apiVersion: sandbox.afe.dev/v1alpha1
kind: Sandbox
metadata: {name: lanes}
spec: {image: `+dockertest.GitImage+`}
`, "apply", "-f", "-")).To(ContainSubstring("sandbox.sandbox.afe.dev/lanes created"))
		defer func() { k("", "delete", "sandbox/lanes", "--wait=true", "--timeout=60s") }()
		k("", "wait", "--for=condition=Ready", "sandbox/lanes", "--timeout=60s")
		container := "afe-default.lanes"
		git := func(script string) string {
			out, err := exec.Command("docker", "exec", container, "sh", "-c", script).CombinedOutput()
			Expect(err).NotTo(HaveOccurred(), string(out))
			return strings.TrimSpace(string(out))
		}
		git(`set -e; cd /workspace && git init -q -b main repo && cd repo && echo base > base.txt
git add -A && git -c user.name=t -c user.email=t@t commit -qm base
git worktree add -q -b a ../lanes/a && git worktree add -q -b b ../lanes/b
echo a > ../lanes/a/a.txt && echo b > ../lanes/b/b.txt`)

		Expect(k(`apiVersion: sandbox.afe.dev/v1alpha1
kind: Run
metadata: {name: merge}
spec:
  sandboxRef: {name: lanes}
  builtin: MergeAndCI
  lanes: [a, b]
  baseRef: main
  ciScript: echo ci-started >> /workspace/ci-runs; if [ "$(wc -l < /workspace/ci-runs)" = 1 ]; then sleep 1005; fi; test -f a.txt && test -f b.txt
`, "apply", "-f", "-")).To(ContainSubstring("run.sandbox.afe.dev/merge created"))
		// The first attempt is in its CI step: the git part is done.
		Eventually(func() string {
			out, _ := exec.Command("docker", "exec", container, "cat", "/workspace/ci-runs").Output()
			return string(out)
		}).Should(Equal("ci-started\n"))
		Eventually(func() string { return git(`ps -o args`) }).Should(ContainSubstring("sleep 1005"), "the first attempt's CI runs")
		first := git(`git -C /workspace/repo rev-parse integration a b`)
		mgr.Kill() // SIGKILL
		Eventually(mgr).Should(gexec.Exit())
		time.Sleep(time.Second)
		start()

		k("", "wait", "--for=jsonpath={.status.phase}=Completed", "run/merge", "--timeout=90s")
		Expect(k("", "get", "run/merge", "-o",
			"jsonpath={.status.attempts} {.status.ok} {.status.result.merged} {.status.result.ci_passed} {.status.result.integration_commit}")).
			To(Equal("2 true true true " + strings.Fields(first)[0]))
		Expect(git(`git -C /workspace/repo rev-parse integration a b`)).To(Equal(first), "the same commits, made again")
		Expect(git(`git -C /workspace/repo rev-list --count a`)).To(Equal("2"), "the lane was committed once")
		Expect(git(`cat /workspace/ci-runs`)).To(Equal("ci-started\nci-started"))
		// The first attempt's CI would sleep for 1005 s: only its kill
		// before the second attempt ended it.
		Expect(git(`ps -o args`)).NotTo(ContainSubstring("sleep 1005"))
	})
})
