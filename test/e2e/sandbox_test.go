package e2e

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
	"github.com/onsi/gomega/gexec"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/test/dockertest"
)

var _ = Describe("The manager binary with kubectl", Ordered, func() {
	var ns string
	// The suite's manager also serves the specs of other containers, which
	// may run before this one: its counters are read against this start.
	var metricsBefore string
	BeforeAll(func() {
		Eventually(func() error {
			resp, err := http.Get("http://" + metricsAddr + "/metrics")
			if err == nil {
				_ = resp.Body.Close()
			}
			return err
		}, "60s").Should(Succeed(), "the suite's manager serves its metrics")
		metricsBefore = scrapeMetrics()
		ns = fmt.Sprintf("e2e-%d", os.Getpid())
		mustKubectl("create", "namespace", ns)
	})

	It("reports ready on its probe", func() {
		Eventually(func() int {
			resp, err := http.Get("http://" + probeAddr + "/readyz")
			if err != nil {
				return 0
			}
			_ = resp.Body.Close()
			return resp.StatusCode
		}).Should(Equal(http.StatusOK))
	})

	It("makes the sample sandbox Ready and hardened", func() {
		t0 := time.Now()
		mustKubectl("apply", "-n", ns, "-f", filepath.Join(root, "config", "samples", "sandbox_v1alpha1_sandbox.yaml"))
		mustKubectl("wait", "-n", ns, "--for=condition=Ready", "sandbox/sample", "--timeout=90s")
		GinkgoWriter.Printf("kubectl apply to Ready: %s\n", time.Since(t0))

		header := strings.Fields(strings.SplitN(mustKubectl("get", "sandboxes", "-n", ns), "\n", 2)[0])
		Expect(header).To(Equal([]string{"NAME", "TICKET", "SCOPE", "IMAGE", "PHASE", "EGRESS", "CONTAINER", "AGE"}))
		row := mustKubectl("get", "sbx", "sample", "-n", ns, "--no-headers")
		Expect(row).To(ContainSubstring("Ready"))
		Expect(row).To(ContainSubstring("afe-" + ns + ".sample"))

		explain := mustKubectl("explain", "sandbox.spec")
		Expect(explain).To(ContainSubstring("egress"))
		Expect(explain).To(ContainSubstring("host names the sandbox may reach"))

		c, err := dockertest.Inspect("afe-" + ns + ".sample")
		Expect(err).NotTo(HaveOccurred())
		Expect(c.HostConfig.CapDrop).To(Equal([]string{"ALL"}))
		Expect(c.HostConfig.SecurityOpt).To(ContainElement("no-new-privileges:true"))
		Expect(c.HostConfig.NetworkMode).To(Equal("none"))
		Expect(c.Config.User).To(Equal(c.Config.Labels["afe.uid"]), "an id of its own from --sandbox-id-range")
		Expect(c.HostConfig.MemorySwap).To(Equal(c.HostConfig.Memory))
		Expect(*c.HostConfig.PidsLimit).To(Equal(int64(256)))
		Expect(strings.Join(c.Config.Env, "\n")).NotTo(ContainSubstring("GREETING"), "given to each command executed in it, not held by the container")
		Expect(c.Config.Labels).To(HaveKeyWithValue(afev1.LabelController, instance))
	})

	It("refuses, with no flag given, the group that owns the engine's socket", func() {
		socket := strings.TrimPrefix(os.Getenv("DOCKER_HOST"), "unix://")
		if socket == "" {
			socket = "/var/run/docker.sock"
		}
		fi, err := os.Stat(socket)
		if err != nil {
			Skip("the engine is not reached through a local socket: " + err.Error())
		}
		gid := fi.Sys().(*syscall.Stat_t).Gid
		if gid == 0 {
			Skip("the engine's socket belongs to root's group, refused anyway")
		}
		sbx := fmt.Sprintf(`apiVersion: sandbox.afe.dev/v1alpha1
kind: Sandbox
metadata:
  name: socket-group
spec:
  image: %s
  user: "1000:%d"
`, dockertest.TestImage, gid)
		Expect(mustKubectlStdin(sbx, "apply", "-n", ns, "-f", "-")).To(ContainSubstring("socket-group created"))
		mustKubectl("wait", "-n", ns, "sandbox/socket-group", "--timeout=60s",
			`--for=jsonpath={.status.conditions[?(@.type=="Ready")].reason}=`+afev1.UserNotAllowedReason)
		Expect(mustKubectl("get", "sbx", "socket-group", "-n", ns, "-o", "jsonpath={.status.phase}")).To(Equal(string(afev1.SandboxFailed)))
		_, err = dockertest.Inspect("afe-" + ns + ".socket-group")
		Expect(err).To(HaveOccurred(), "a container was made")
		mustKubectl("delete", "-n", ns, "sandbox/socket-group", "--timeout=60s")
	})

	It("serves the kubectl plugin: run, logs, exec, shell, with no Docker CLI and no engine in reach", func() {
		plugin := pluginBin()
		afe := pluginWithoutDocker(ns)
		out, _, code := afe("", "run", "sample", "--", "sh", "-c", "echo from-plugin; echo oops >&2; exit 7")
		Expect(code).To(Equal(7))
		Expect(out).To(ContainSubstring("from-plugin\n"))
		Expect(out).To(ContainSubstring("oops\n"))

		out, errs, code := afe("", "run", "sample", "--script", "echo $GREETING")
		Expect(code).To(BeZero(), errs)
		Expect(out).To(Equal("hello from the sandbox\n"))
		name := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(errs), "run/"), " created")
		out, _, code = afe("", "logs", name)
		Expect(code).To(BeZero())
		Expect(out).To(Equal("hello from the sandbox\n"))

		_, errs, code = afe("", "run", "sample", "--timeout=1s", "--", "sleep", "30")
		Expect(code).To(Equal(124), errs)
		Expect(errs).To(ContainSubstring("timed out"))

		_, _, code = afe("", "run", "sample", "--", "/no/such/binary")
		Expect(code).To(Equal(125))

		// A marker only the sandbox's own container holds: the shell reaches
		// that very container.
		marker := fmt.Sprintf("shell-marker-%d", time.Now().UnixNano())
		mark, err := exec.Command("docker", "exec", "afe-"+ns+".sample", "sh", "-c", "echo "+marker+" > /tmp/afe-shell-marker").CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(mark))
		out, errs, code = afe("id -u; id -g; pwd; cat /tmp/afe-shell-marker\n", "shell", "sample")
		Expect(code).To(BeZero(), errs)
		sc, err := dockertest.Inspect("afe-" + ns + ".sample")
		Expect(err).NotTo(HaveOccurred())
		uid, gid, _ := strings.Cut(sc.Config.User, ":") // the id allocated to it
		Expect(out).To(Equal(uid + "\n" + gid + "\n/workspace\n" + marker + "\n"))

		By("exec: stdin, stdout, stderr and the exit code, as kubectl exec")
		out, errs, code = afe("piped\n", "exec", "sample", "-i", "--", "sh", "-c", "cat; cat /tmp/afe-shell-marker; echo to-stderr >&2; exit 5")
		Expect(code).To(Equal(5), errs)
		Expect(out).To(Equal("piped\n" + marker + "\n"))
		Expect(errs).To(Equal("to-stderr\n"))
		out, errs, code = afe("", "exec", "sample", "--", "sh", "-c", `printf '%s' "$GREETING"`)
		Expect(code).To(BeZero(), errs)
		Expect(out).To(Equal("hello from the sandbox"), "the sandbox's declared env")
		_, errs, code = afe("", "exec", "missing", "--", "true")
		Expect(code).To(Equal(1))
		Expect(errs).To(ContainSubstring(`"missing" not found`))

		By("passing a workload's output on byte for byte to a pipe, escaped to a terminal")
		hostile := "\x1b]52;c;aGk=\x07\x1b[2J\rcleared\u009b31m\u202eexe.txt\n"
		out, errs, code = afe("", "run", "sample", "--", "printf", `\033]52;c;aGk=\007\033[2J\rcleared\302\23331m\342\200\256exe.txt\n`)
		Expect(code).To(BeZero(), errs)
		Expect(out).To(Equal(hostile))
		hostileRun := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(errs), "run/"), " created")
		out, _, code = afe("", "logs", hostileRun)
		Expect(code).To(BeZero())
		Expect(out).To(Equal(hostile))
		// The finished Run's log and logs -f's path alike.
		for _, args := range [][]string{{"logs", hostileRun}, {"logs", "-f", hostileRun}} {
			tty, reader := openPTY()
			cmd := exec.Command(plugin, append([]string{"--kubeconfig", cp.Kubeconfig, "-n", ns}, args...)...)
			cmd.Stdout = tty
			Expect(cmd.Run()).To(Succeed())
			Expect(readAvailable(reader)).To(Equal(`\x1b]52;c;aGk=\a\x1b[2J\rcleared\u009b31m\u202eexe.txt`+"\n"), "kubectl afe %v", args)
		}

		By("honouring KUBECONFIG and --namespace=NS, as kubectl does")
		cmd := exec.Command(plugin, "--namespace="+ns, "logs", name)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+cp.Kubeconfig)
		viaEnv, err := cmd.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(viaEnv))
		Expect(string(viaEnv)).To(Equal("hello from the sandbox\n"))

		By("following a Run's whole output with logs -f, to its exit code")
		mustKubectlStdin(`apiVersion: sandbox.afe.dev/v1alpha1
kind: Run
metadata:
  name: follow
spec:
  sandboxRef: {name: sample}
  script: for i in 1 2 3; do echo tick $i; sleep 1; done; exit 3
`, "apply", "-n", ns, "-f", "-")
		out, errs, code = afe("", "logs", "-f", "follow")
		Expect(code).To(Equal(3), errs)
		Expect(out).To(Equal("tick 1\ntick 2\ntick 3\n"))

		By("recording the shell and the exec as Events naming the user")
		// Written after the exec's status is sent to the client.
		Eventually(func() string {
			return mustKubectl("get", "events.events.k8s.io", "-n", ns, "--field-selector", "reason=Exec", "-o", "jsonpath={range .items[*]}{.note}{\"\\n\"}{end}")
		}, time.Minute, time.Second).Should(And(
			ContainSubstring(`User "afe-admin" ran "/bin/sh" (tty false): exit code 0`),
			ContainSubstring(`User "afe-admin" ran "sh" "-c" "cat; cat /tmp/afe-shell-marker; echo to-stderr >&2; exit 5" (tty false): exit code 5`)))
	})

	It("copies a file and a tree up into /workspace and back down with kubectl afe cp, with no Docker CLI and no engine in reach", func() {
		afe := pluginWithoutDocker(ns)
		local := GinkgoT().TempDir()
		rng := rand.New(rand.NewPCG(16, 2))
		random := func(n int) []byte {
			b := make([]byte, n)
			for i := range b {
				b[i] = byte(rng.UintN(256))
			}
			return b
		}
		file := filepath.Join(local, "blob.bin")
		Expect(os.WriteFile(file, random(3<<20+17), 0o644)).To(Succeed())
		tree := filepath.Join(local, "tree")
		for _, d := range []string{"sub/deeper", "empty"} {
			Expect(os.MkdirAll(filepath.Join(tree, d), 0o755)).To(Succeed())
		}
		for name, f := range map[string]struct {
			data []byte
			mode os.FileMode
		}{
			"a.txt": {[]byte("hello\r\n\x00\xff"), 0o644}, "sub/b.bin": {random(200 << 10), 0o755},
			"sub/deeper/c.txt": {[]byte("deep\n"), 0o600}, "sub/deeper/.hidden": {nil, 0o644},
		} {
			p := filepath.Join(tree, name)
			Expect(os.WriteFile(p, f.data, f.mode)).To(Succeed())
			Expect(os.Chmod(p, f.mode)).To(Succeed())
		}
		Expect(os.Symlink("../a.txt", filepath.Join(tree, "sub", "link"))).To(Succeed())

		By("uploading the file at a path of its own and the tree into /workspace/")
		_, errs, code := afe("", "cp", file, "sample:/workspace/up.bin")
		Expect(code).To(BeZero(), errs)
		_, errs, code = afe("", "cp", tree, "sample:/workspace/")
		Expect(code).To(BeZero(), errs)

		By("finding them in the sandbox, byte for byte, owned by the sandbox's user")
		container := "afe-" + ns + ".sample"
		sums, err := dockertest.Exec(container, "sha256sum", "/workspace/up.bin", "/workspace/tree/sub/b.bin")
		Expect(err).NotTo(HaveOccurred(), sums)
		for _, p := range []string{file, filepath.Join(tree, "sub", "b.bin")} {
			data, err := os.ReadFile(p)
			Expect(err).NotTo(HaveOccurred())
			Expect(sums).To(ContainSubstring(fmt.Sprintf("%x", sha256.Sum256(data))))
		}
		owners, err := dockertest.Exec(container, "sh", "-c", `find /workspace/up.bin /workspace/tree -exec stat -c '%u:%g %n' {} \;`)
		Expect(err).NotTo(HaveOccurred(), owners)
		lines := strings.Split(strings.TrimSpace(owners), "\n")
		Expect(lines).To(HaveLen(2+len(treeOf(tree))), owners)
		ci, err := dockertest.Inspect(container)
		Expect(err).NotTo(HaveOccurred())
		for _, l := range lines {
			Expect(l).To(HavePrefix(ci.Config.User + " "))
		}

		By("downloading them back: at a path of their own, and into an existing folder")
		back := GinkgoT().TempDir()
		_, errs, code = afe("", "cp", "sample:/workspace/up.bin", filepath.Join(back, "down.bin"))
		Expect(code).To(BeZero(), errs)
		want, err := os.ReadFile(file)
		Expect(err).NotTo(HaveOccurred())
		got, err := os.ReadFile(filepath.Join(back, "down.bin"))
		Expect(err).NotTo(HaveOccurred())
		Expect(bytes.Equal(got, want)).To(BeTrue(), "the file came back different")
		_, errs, code = afe("", "cp", "sample:/workspace/tree", filepath.Join(back, "tree-copy"))
		Expect(code).To(BeZero(), errs)
		Expect(treeOf(filepath.Join(back, "tree-copy"))).To(Equal(treeOf(tree)))
		_, errs, code = afe("", "cp", "sample:/workspace/tree", back)
		Expect(code).To(BeZero(), errs)
		Expect(treeOf(filepath.Join(back, "tree"))).To(Equal(treeOf(tree)))

		By("leaving no helper container behind")
		Eventually(func() ([]string, error) {
			return dockertest.Objects(afev1.LabelController + "=" + instance + "," + afev1.LabelSandbox + "=sample")
		}).Should(ConsistOf("container/"+container, "volume/"+container+"_ws"))
	})

	It("serves its metrics", func() {
		// A Run's end is counted after its status is written: scraped
		// until the counts are there.
		Eventually(func(g Gomega) {
			text := scrapeMetrics()
			for series, added := range map[string]float64{
				`afe_sandbox_ready_seconds_count{egress="false"}`: 1,
				`afe_runs_total{ok="false",phase="TimedOut"}`:     1,
				`afe_runs_total{ok="false",phase="Failed"}`:       1,
			} {
				g.Expect(sampleOf(text, series)-sampleOf(metricsBefore, series)).To(Equal(added), series)
			}
			for _, series := range []string{
				`afe_runs_total{ok="false",phase="Completed"}`,
				`afe_runs_total{ok="true",phase="Completed"}`,
			} {
				g.Expect(sampleOf(text, series)).To(BeNumerically(">", sampleOf(metricsBefore, series)), series)
			}
			for _, series := range []string{
				`afe_run_duration_seconds_bucket{phase="Completed",le=`,
				`afe_docker_requests_total{operation="container_create"}`,
				`afe_docker_requests_total{operation="container_exec_create"}`,
				`controller_runtime_reconcile_total{controller="sandbox"`,
			} {
				g.Expect(text).To(ContainSubstring(series))
			}
		}, 30*time.Second, time.Second).Should(Succeed())
	})

	It("ends logs -f of a Run that ends without ever executing, with its status and exit code", func() {
		// Suspended, the sandbox holds the Run Pending until its deadline
		// fails it: it is never executed and has no log.
		mustKubectlStdin(fmt.Sprintf(`apiVersion: sandbox.afe.dev/v1alpha1
kind: Sandbox
metadata:
  name: never-runs
spec:
  image: %s
  suspend: true
  lifecycle: {activeDeadlineSeconds: 20}
---
apiVersion: sandbox.afe.dev/v1alpha1
kind: Run
metadata:
  name: never-runs
spec:
  sandboxRef: {name: never-runs}
  command: [echo, never]
`, dockertest.TestImage), "apply", "-n", ns, "-f", "-")
		DeferCleanup(func() {
			mustKubectl("delete", "-n", ns, "run/never-runs", "sandbox/never-runs", "--ignore-not-found", "--timeout=60s")
			Expect(dockertest.Objects(afev1.LabelNamespace + "=" + ns + "," + afev1.LabelSandbox + "=never-runs")).To(BeEmpty())
		})
		mustKubectl("wait", "-n", ns, "--for=jsonpath={.status.phase}=Pending", "run/never-runs", "--timeout=60s")
		pluginWithoutDocker(ns) // the access API is there
		logs, err := gexec.Start(pluginCommandWithoutDocker(ns, "logs", "-f", "never-runs"), GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { logs.Kill() })
		Consistently(logs, "3s").ShouldNot(gexec.Exit(), "logs -f ended while the Run was Pending")
		Eventually(logs, "90s").Should(gexec.Exit(125))
		Expect(string(logs.Err.Contents())).To(ContainSubstring("run/never-runs failed: Sandbox never-runs ran past its lifecycle.activeDeadlineSeconds"))
		Expect(logs.Out.Contents()).To(BeEmpty())
		Expect(mustKubectl("get", "-n", ns, "run/never-runs", "-o", "jsonpath={.status.phase}/{.status.attempts}")).To(Equal("Failed/"))
	})

	It("shows columns, short names and descriptions", func() {
		header := strings.Fields(strings.SplitN(mustKubectl("get", "runs", "-n", ns), "\n", 2)[0])
		Expect(header).To(Equal([]string{"NAME", "SANDBOX", "PHASE", "EXIT", "DURATION", "AGE"}))
		Expect(mustKubectl("explain", "ticket.spec")).To(ContainSubstring("lanes of work"))
		Expect(mustKubectl("explain", "run.spec")).To(ContainSubstring("executed as is"))
		Expect(mustKubectl("explain", "tk.status")).To(ContainSubstring("requeues"))
		Expect(mustKubectl("get", "afe", "-n", ns)).To(ContainSubstring("sandbox.sandbox.afe.dev/sample"))
	})

	It("accepts config/default with a server-side dry run", func() {
		_, _ = kubectl("create", "namespace", "afe-system")
		out := mustKubectl("apply", "-k", filepath.Join(root, "config", "default"), "--dry-run=server")
		Expect(out).To(ContainSubstring("deployment.apps/afe-controller-manager created (server dry run)"))
		Expect(out).To(ContainSubstring("clusterrole.rbac.authorization.k8s.io/afe-manager-role created (server dry run)"))

		By("accepting the per-node overlay: a DaemonSet in place of the Deployment")
		out = mustKubectl("apply", "-k", filepath.Join(root, "config", "per-node"), "--dry-run=server")
		Expect(out).To(ContainSubstring("daemonset.apps/afe-controller-node created (server dry run)"))
		Expect(out).NotTo(ContainSubstring("deployment.apps/"))

		By("accepting the overlay for a remote engine: TLS from a Secret, no socket")
		out = mustKubectl("apply", "-k", filepath.Join(root, "config", "remote-engine"), "--dry-run=server")
		Expect(out).To(ContainSubstring("deployment.apps/afe-controller-manager created (server dry run)"))
		rendered := mustKubectl("kustomize", filepath.Join(root, "config", "remote-engine"))
		Expect(rendered).To(ContainSubstring("DOCKER_TLS_VERIFY"))
		Expect(rendered).To(ContainSubstring("secretName: docker-tls"))
		Expect(rendered).NotTo(ContainSubstring("docker.sock"))

		By("accepting every sample, applied as a directory")
		out = mustKubectl("apply", "-n", ns, "-f", filepath.Join(root, "config", "samples"), "--dry-run=server")
		entries, err := os.ReadDir(filepath.Join(root, "config", "samples"))
		Expect(err).NotTo(HaveOccurred())
		Expect(strings.Count(out, "(server dry run)")).To(BeNumerically(">=", len(entries)), out)
	})

	It("finds its container again after a crash, without a duplicate", func() {
		before, err := dockertest.Inspect("afe-" + ns + ".sample")
		Expect(err).NotTo(HaveOccurred())
		manager.Kill()
		Eventually(manager).Should(gexec.Exit())
		startManager()
		mustKubectl("wait", "-n", ns, "--for=condition=Ready", "sandbox/sample", "--timeout=60s")
		Consistently(func() ([]string, error) {
			return dockertest.Objects(afev1.LabelController + "=" + instance)
		}, "3s").Should(ConsistOf("container/"+before.Name, "volume/afe-"+ns+".sample_ws"))
		after, err := dockertest.Inspect(before.Name)
		Expect(err).NotTo(HaveOccurred())
		Expect(after.ID).To(Equal(before.ID))
	})

	It("executes again a Run that was in flight when the manager was killed", func() {
		run := `apiVersion: sandbox.afe.dev/v1alpha1
kind: Run
metadata:
  name: crash
spec:
  sandboxRef: {name: sample}
  script: |
    echo attempt >> /workspace/attempts
    echo "attempt $(wc -l < /workspace/attempts) began"
    # The first attempt would sleep far beyond the test: only a kill ends it.
    if [ "$(wc -l < /workspace/attempts)" = 1 ]; then sleep 1000; fi
    echo "{\"attempts_seen\": $(wc -l < /workspace/attempts)}"
`
		mustKubectlStdin(run, "apply", "-n", ns, "-f", "-")
		mustKubectl("wait", "-n", ns, "--for=jsonpath={.status.phase}=Running", "run/crash", "--timeout=60s")
		// Running is written before the exec starts: kill once the script runs.
		Eventually(func() string {
			out, _ := dockertest.Exec("afe-"+ns+".sample", "cat", "/workspace/attempts")
			return out
		}).Should(Equal("attempt"))
		// logs -f follows the first attempt, across the kill, and the
		// attempt made after the restart, to the Run's exit code.
		logs, err := gexec.Start(pluginCommandWithoutDocker(ns, "logs", "-f", "crash"), GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { logs.Kill() })
		Eventually(logs.Out).Should(gbytes.Say("attempt 1 began\n"))
		manager.Kill()
		Eventually(manager).Should(gexec.Exit())
		startManager()
		mustKubectl("wait", "-n", ns, "--for=jsonpath={.status.phase}=Completed", "run/crash", "--timeout=90s")
		Eventually(logs, "60s").Should(gexec.Exit(0))
		Expect(string(logs.Out.Contents())).To(Equal("attempt 1 began\nattempt 2 began\n{\"attempts_seen\": 2}\n"))
		Expect(string(logs.Err.Contents())).To(ContainSubstring("--- run/crash: attempt 2 ---\n"))
		Expect(mustKubectl("get", "-n", ns, "run/crash", "-o", "jsonpath={.status.attempts} {.status.ok} {.status.result.attempts_seen}")).
			To(Equal("2 true 2"))
		out, err := dockertest.Exec("afe-"+ns+".sample", "ps", "-o", "args")
		Expect(err).NotTo(HaveOccurred())
		Expect(out).NotTo(ContainSubstring("sleep 1000"), "the first attempt's process was stopped")

		header := strings.Fields(strings.SplitN(mustKubectl("get", "runs", "-n", ns), "\n", 2)[0])
		Expect(header).To(Equal([]string{"NAME", "SANDBOX", "PHASE", "EXIT", "DURATION", "AGE"}))
	})

	It("creates no duplicates when the manager dies during provisioning", func() {
		mustKubectl("apply", "-n", ns, "-f", filepath.Join(root, "config", "samples", "sandbox_v1alpha1_ticket.yaml"))
		// Kill the manager as soon as the ticket's first Docker object exists.
		Eventually(func() ([]string, error) {
			return dockertest.Objects(afev1.LabelTicket + "=sample-ticket")
		}, "60s", "10ms").ShouldNot(BeEmpty())
		manager.Kill()
		Eventually(manager).Should(gexec.Exit())
		killed, err := dockertest.Objects(afev1.LabelTicket + "=sample-ticket")
		Expect(err).NotTo(HaveOccurred())
		GinkgoWriter.Printf("objects when killed: %v\n", killed)
		startManager()
		mustKubectl("wait", "-n", ns, "--for=jsonpath={.status.phase}=Ready", "ticket/sample-ticket", "--timeout=90s")
		key := "afe-" + ns + ".sample-ticket"
		Consistently(func() ([]string, error) {
			return dockertest.Objects(afev1.LabelTicket + "=sample-ticket")
		}, "3s").Should(ConsistOf("container/"+key, "container/"+key+"_proxy", "network/"+key+"_net", "volume/"+key+"_ws"))
		row := strings.Fields(mustKubectl("get", "tk", "sample-ticket", "-n", ns, "--no-headers"))
		Expect(row[:4]).To(Equal([]string{"sample-ticket", "Active", "Ready", "1/1"}))
		header := strings.Fields(strings.SplitN(mustKubectl("get", "tickets", "-n", ns), "\n", 2)[0])
		Expect(header).To(Equal([]string{"NAME", "STATE", "PHASE", "READY", "REQUEUES", "AGE"}))

		By("losing its container: recreated, the ticket requeued")
		Expect(dockertest.RemoveContainer(key)).To(Succeed())
		mustKubectl("wait", "-n", ns, "--for=jsonpath={.status.requeues}=1", "ticket/sample-ticket", "--timeout=60s")
		mustKubectl("wait", "-n", ns, "--for=jsonpath={.status.phase}=Ready", "ticket/sample-ticket", "--timeout=60s")

		mustKubectl("patch", "-n", ns, "ticket/sample-ticket", "--type=merge", "-p", `{"spec":{"state":"Done"}}`)
		mustKubectl("wait", "-n", ns, "--for=condition=CleanedUp", "ticket/sample-ticket", "--timeout=60s")
		Expect(dockertest.Objects(afev1.LabelTicket + "=sample-ticket")).To(BeEmpty())

		By("counting it all in the metrics of the manager started after the kill")
		Eventually(scrapeMetrics).Should(And(
			ContainSubstring(`afe_sandbox_ready_seconds_count{egress="true"} 1`),
			ContainSubstring(`afe_sandbox_recreations_total{reason="lost"} 1`),
			ContainSubstring("afe_sandbox_loss_to_recreated_seconds_count 1"),
			ContainSubstring("afe_ticket_done_to_cleaned_seconds_count 1"),
		))
	})

	It("removes every Docker object on delete", func() {
		mustKubectl("delete", "-n", ns, "sandbox/sample", "--timeout=60s")
		Expect(dockertest.Objects(afev1.LabelNamespace + "=" + ns)).To(BeEmpty())
	})

	It("opens the plugin's shell as the sandbox's uid and its own gid when spec.user is a bare uid", func() {
		Expect(mustKubectlStdin(`apiVersion: sandbox.afe.dev/v1alpha1
kind: Sandbox
metadata:
  name: bare-uid
spec:
  image: afe/busybox:dev
  user: "2000"
`, "apply", "-n", ns, "-f", "-")).To(Equal("sandbox.sandbox.afe.dev/bare-uid created"))
		mustKubectl("wait", "-n", ns, "--for=condition=Ready", "sandbox/bare-uid", "--timeout=90s")
		cmd := exec.Command(pluginBin(), "--kubeconfig", cp.Kubeconfig, "-n", ns, "shell", "bare-uid")
		cmd.Stdin = strings.NewReader("id -u; id -g\n")
		out, err := cmd.Output()
		Expect(err).NotTo(HaveOccurred())
		// A bare --user 2000 would run with the group of uid 2000 in the
		// image, root's when the image does not know it.
		Expect(string(out)).To(Equal("2000\n2000\n"))
		mustKubectl("delete", "-n", ns, "sandbox/bare-uid", "--timeout=60s")
		Expect(dockertest.Objects(afev1.LabelNamespace + "=" + ns + "," + afev1.LabelSandbox + "=bare-uid")).To(BeEmpty())
	})

	It("stops on SIGTERM", func() {
		manager.Signal(syscall.SIGTERM)
		Eventually(manager, 20*time.Second).Should(gexec.Exit(0))
		// The specs of other containers that run after this one use the
		// suite's manager too (monitoring, warm pools): it starts again.
		startManager()
	})
})

// pluginWithoutDocker runs the plugin in ns as a user with no Docker: a
// PATH holding no docker binary and a DOCKER_HOST pointing nowhere. It
// needs only its kubeconfig. It answers the plugin's stdout, stderr and
// exit code.
func pluginWithoutDocker(ns string) func(stdin string, args ...string) (string, string, int) {
	mustKubectl("wait", "--for=condition=Available", "apiservice/v1alpha1.access.sandbox.afe.dev", "--timeout=60s")
	return func(stdin string, args ...string) (string, string, int) {
		cmd := pluginCommandWithoutDocker(ns, args...)
		cmd.Stdin = strings.NewReader(stdin)
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		} else {
			ExpectWithOffset(1, err).NotTo(HaveOccurred())
		}
		return out.String(), errb.String(), code
	}
}

// pluginCommandWithoutDocker is the plugin's command in ns with no Docker
// CLI and no engine in reach.
func pluginCommandWithoutDocker(ns string, args ...string) *exec.Cmd {
	cmd := exec.Command(pluginBin(), append([]string{"--kubeconfig", cp.Kubeconfig, "-n", ns}, args...)...)
	cmd.Env = []string{"PATH=" + GinkgoT().TempDir(), "DOCKER_HOST=unix:///nonexistent/docker.sock", "HOME=" + GinkgoT().TempDir()}
	return cmd
}

// treeOf describes every entry under dir: its type, permissions, and its
// content or symlink target.
func treeOf(dir string) map[string]string {
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			out[rel] = "symlink to " + target
			return err
		case info.IsDir():
			out[rel] = "dir " + info.Mode().Perm().String()
		default:
			data, err := os.ReadFile(p)
			out[rel] = fmt.Sprintf("%s %x", info.Mode(), sha256.Sum256(data))
			return err
		}
		return nil
	})
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return out
}

// scrapeMetrics reads the running manager's metrics endpoint.
// sampleOf is the value of one series, named with all its labels, in a
// scrape; 0 when the scrape has none.
func sampleOf(text, series string) float64 {
	for _, line := range strings.Split(text, "\n") {
		if value, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
			Expect(err).NotTo(HaveOccurred(), line)
			return v
		}
	}
	return 0
}

func scrapeMetrics() string {
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	return string(body)
}
