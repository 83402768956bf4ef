package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
	"github.com/onsi/gomega/gexec"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/client"
	"afe.dev/sandbox/test/dockertest"
)

// pythonExec is the Python client's exec of the command in argv, after a
// line "exec" saying it is about to: its exit code and output.
const pythonExec = `import sys
from afe_sandbox import Client
c = Client("default")
print("exec", flush=True)
r = c.exec(sys.argv[1], sys.argv[2:], timeout=60)
print(r.returncode, r.stdout.strip(), r.stderr.strip(), flush=True)
`

// The access API while its manager starts: the API server answers 503
// for it until its aggregator reaches the new manager (issue 48). An
// exec of each client that starts while no manager serves it waits for
// the one that starts, and runs its command once.
var _ = Describe("The access API while its manager starts", func() {
	It("serves an exec of kubectl afe, the Go client and the Python client begun before the manager serves", func() {
		own := newOwnCluster()
		inst := fmt.Sprintf("e2e-startup-%d", os.Getpid())
		defer dockertest.RemoveAll(afev1.LabelController + "=" + inst)
		start := func() *gexec.Session {
			return own.startManager("", nil, "--instance", inst, "--access-bind-address", "127.0.0.1:0",
				"--access-service", "afe-local/access", "--access-register", "--access-external-name", "localhost")
		}
		mgr := start()
		defer func() { stopManager(mgr) }()
		own.kubectl("apiVersion: sandbox.afe.dev/v1alpha1\nkind: Sandbox\nmetadata: {name: startup}\nspec: {image: afe/busybox:dev}\n", "apply", "-f", "-")
		own.kubectl("", "wait", "--for=condition=Ready", "sandbox/startup", "--timeout=90s")

		By("stopping the manager: the API server answers 503 for the access API")
		stopManager(mgr)
		mgr = nil
		out, err := exec.Command("kubectl", "--kubeconfig", own.Kubeconfig, "get", "--raw", "/apis/access.sandbox.afe.dev/v1alpha1").CombinedOutput()
		Expect(err).To(HaveOccurred(), string(out))
		Expect(string(out)).To(ContainSubstring("the server is currently unable to handle the request"))

		By("beginning an exec of each client, then starting the manager")
		record := func(who string) []string { return []string{"sh", "-c", "echo " + who + " >> execs; echo " + who} }
		plugin := exec.Command(pluginBin(), "--kubeconfig", own.Kubeconfig, "-n", "default", "exec", "startup", "--")
		plugin.Args = append(plugin.Args, record("kubectl")...)
		pluginOut := gbytes.NewBuffer()
		pluginRun, err := gexec.Start(plugin, pluginOut, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		python := exec.Command("/usr/bin/python3", append([]string{"-c", pythonExec, "startup"}, record("python")...)...)
		python.Env = append(os.Environ(), "KUBECONFIG="+own.Kubeconfig, "PYTHONPATH="+filepath.Join(root, "clients", "python"), "PYTHONDONTWRITEBYTECODE=1")
		pythonOut := gbytes.NewBuffer()
		pythonRun, err := gexec.Start(python, pythonOut, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		c, err := client.New(own.Config, client.WithNamespace("default"))
		Expect(err).NotTo(HaveOccurred())
		goExec := make(chan error, 1)
		var goOut strings.Builder
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			code, err := c.Exec(ctx, "startup", client.ExecOptions{Command: record("go"), Stdout: &goOut})
			if err == nil && code != 0 {
				err = fmt.Errorf("exit %d", code)
			}
			goExec <- err
		}()
		// The Python client imports its packages first; once it says it
		// execs, the plugin (begun before it) has begun too.
		Eventually(pythonOut, "30s").Should(gbytes.Say("exec\n"))
		began := time.Now()
		mgr = start()

		var goErr error
		Eventually(goExec, "60s").Should(Receive(&goErr))
		Expect(goErr).NotTo(HaveOccurred())
		Expect(goOut.String()).To(Equal("go\n"))
		Eventually(pluginRun, "60s").Should(gexec.Exit(0), string(pluginOut.Contents()))
		Expect(string(pluginOut.Contents())).To(Equal("kubectl\n"))
		Eventually(pythonRun, "60s").Should(gexec.Exit(0), string(pythonOut.Contents()))
		Expect(string(pythonOut.Contents())).To(HaveSuffix("0 python \n"))
		GinkgoWriter.Printf("the three execs ended %s after the manager was started\n", time.Since(began).Round(time.Millisecond))

		By("having run each command once")
		var lines strings.Builder
		_, err = c.Exec(context.Background(), "startup", client.ExecOptions{Command: []string{"cat", "execs"}, Stdout: &lines})
		Expect(err).NotTo(HaveOccurred())
		got := strings.Fields(lines.String())
		sort.Strings(got)
		Expect(got).To(Equal([]string{"go", "kubectl", "python"}))
	})
})
