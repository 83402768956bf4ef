package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
	"github.com/onsi/gomega/gexec"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/hack/controlplane"
	"afe.dev/sandbox/internal/naming"
	"afe.dev/sandbox/test/dockertest"
	"afe.dev/sandbox/test/testenv"
	"afe.dev/sandbox/test/wsroot"
)

// Per-node mode on one machine: a control plane of its own with
// kube-scheduler, three Node objects of 2 CPUs (no kubelet: the scheduler
// only binds), and one manager binary per node, each with --per-node and
// the node's name as its --instance, all on this machine's engine.
var _ = Describe("Per-node mode", Ordered, Label("per-node"), ownPlane, func() {
	var (
		pcp      *controlplane.ControlPlane
		nodes    []string
		managers []*gexec.Session
		ns       = "pernode"
		// folders is the managers' --workspace-root, one for the machine.
		folders string
		// logs are the managers' output.
		logs []*gbytes.Buffer
		// accessPorts are the managers' access API ports; managerDirs
		// holds each one's Run logs and telemetry, kept across a restart.
		accessPorts  []int
		managerDirs  string
		startManager func(i int)
	)
	pkubectl := func(args ...string) string {
		cmd := exec.Command("kubectl", append([]string{"--kubeconfig", pcp.Kubeconfig}, args...)...)
		out, err := cmd.CombinedOutput()
		ExpectWithOffset(1, err).NotTo(HaveOccurred(), "kubectl %s: %s", strings.Join(args, " "), out)
		return strings.TrimSpace(string(out))
	}
	pkubectlStdin := func(stdin string, args ...string) {
		cmd := exec.Command("kubectl", append([]string{"--kubeconfig", pcp.Kubeconfig}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		ExpectWithOffset(1, err).NotTo(HaveOccurred(), "kubectl %s: %s", strings.Join(args, " "), out)
	}
	ticket := func(name, extra string) string {
		return fmt.Sprintf(`apiVersion: sandbox.afe.dev/v1alpha1
kind: Ticket
metadata:
  name: %s
spec:
  sandbox:
    image: %s
    resources: {cpu: 500m, memory: 64Mi, pids: 64}
%s---
`, name, dockertest.TestImage, extra)
	}
	// placed is each Ticket's phase, Ready condition reason and node.
	type placedTicket struct{ phase, reason, message, node string }
	tickets := func() map[string]placedTicket {
		out := pkubectl("get", "tickets", "-n", ns, "-o",
			`jsonpath={range .items[*]}{.metadata.name}|{.status.phase}|{.status.node}|{.status.conditions[?(@.type=="Ready")].reason}|{.status.conditions[?(@.type=="Ready")].message}{"\n"}{end}`)
		m := map[string]placedTicket{}
		for _, line := range strings.Split(out, "\n") {
			f := strings.SplitN(line, "|", 5)
			if len(f) == 5 {
				m[f[0]] = placedTicket{phase: f[1], node: f[2], reason: f[3], message: f[4]}
			}
		}
		return m
	}
	count := func(m map[string]placedTicket, ok func(placedTicket) bool) int {
		n := 0
		for _, t := range m {
			if ok(t) {
				n++
			}
		}
		return n
	}
	// onEngine is, by instance (node), the sandbox containers of the
	// namespace the engine runs.
	onEngine := func() map[string][]string {
		m := map[string][]string{}
		for _, node := range nodes {
			out, err := exec.Command("docker", "ps", "-a", "--filter", "label="+afev1.LabelController+"="+node,
				"--filter", "label="+afev1.LabelRole+"="+afev1.RoleSandbox, "--format", `{{.Label "`+afev1.LabelSandbox+`"}}`).Output()
			ExpectWithOffset(1, err).NotTo(HaveOccurred())
			m[node] = append(m[node], strings.Fields(string(out))...)
			sort.Strings(m[node])
		}
		return m
	}
	// eventually waits for Events of the namespace matching the field
	// selector: the recorder writes them on its own, after what they tell.
	eventually := func(selector string) {
		EventuallyWithOffset(1, func() []string {
			return strings.Fields(pkubectl("get", "events", "-n", ns, "--field-selector", selector, "-o", "name"))
		}, time.Minute, time.Second).ShouldNot(BeEmpty(), "events %s", selector)
	}
	setState := func(state string, names ...string) {
		for _, n := range names {
			pkubectl("patch", "ticket", n, "-n", ns, "--type=merge", "-p", `{"spec":{"state":"`+state+`"}}`)
		}
	}

	BeforeAll(func() {
		assets, err := testenv.AssetsDir()
		Expect(err).NotTo(HaveOccurred())
		pcp, err = controlplane.Start(GinkgoT().TempDir(), assets, filepath.Join(root, "config", "crd", "bases"))
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { Expect(pcp.Stop()).To(Succeed()) })
		Expect(pcp.StartScheduler(assets)).To(Succeed())

		ctx := context.Background()
		for i := 1; i <= 3; i++ {
			node := fmt.Sprintf("%s-n%d", instance, i)
			nodes = append(nodes, node)
			Expect(controlplane.RegisterNode(ctx, pcp.Config, node, corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110"),
			}, map[string]string{"afe.dev/e2e-pool": fmt.Sprintf("pool-%d", i)})).To(Succeed())
		}
		DeferCleanup(func() {
			for _, node := range nodes {
				dockertest.RemoveAll(afev1.LabelController + "=" + node)
			}
		})
		// The managers run as config/per-node ships them: its
		// ServiceAccount with config/rbac's role and the placement role,
		// nothing else (no kubelet or DaemonSet controller runs its
		// DaemonSet here).
		pkubectl("apply", "-k", filepath.Join(root, "config", "per-node"))
		saConfig := filepath.Join(GinkgoT().TempDir(), "kubeconfig")
		raw, err := os.ReadFile(pcp.Kubeconfig)
		Expect(err).NotTo(HaveOccurred())
		Expect(os.WriteFile(saConfig, raw, 0o600)).To(Succeed())
		token := pkubectl("create", "token", "afe-controller-manager", "-n", "afe-system", "--duration", "1h")
		for _, args := range [][]string{
			{"config", "set-credentials", "afe-node", "--token", token},
			{"config", "set-context", "--current", "--user", "afe-node"},
		} {
			Expect(exec.Command("kubectl", append([]string{"--kubeconfig", saConfig}, args...)...).Run()).To(Succeed())
		}
		// Mounted nosuid,nodev, as the managers ask of --workspace-root.
		var cleanupFolders func() error
		folders, cleanupFolders, err = wsroot.Make(true)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { Expect(cleanupFolders()).To(Succeed()) })
		// The access API: each manager at a port of its own, all
		// registering the APIService at node 1's (the Service is an
		// ExternalName to localhost, as a cluster network would reach a
		// manager); the access specs point it at another one.
		for range nodes {
			accessPorts = append(accessPorts, freePort())
		}
		logs = make([]*gbytes.Buffer, len(nodes))
		managers = make([]*gexec.Session, len(nodes))
		startManager = func(i int) {
			runLogs := filepath.Join(managerDirs, nodes[i], "run-logs")
			Expect(os.MkdirAll(runLogs, 0o700)).To(Succeed())
			cmd := exec.Command(managerBin, "--per-node", "--instance", nodes[i],
				"--metrics-bind-address", "0", "--health-probe-bind-address", "0",
				"--resync-period", "10s", "--run-log-dir", runLogs, "--workspace-root", folders,
				"--telemetry-db", filepath.Join(managerDirs, nodes[i], "telemetry.db"),
				"--access-bind-address", fmt.Sprintf("127.0.0.1:%d", accessPorts[i]), "--access-register",
				"--access-service", "afe-system/afe-access", "--access-service-port", fmt.Sprint(accessPorts[0]),
				"--peer-bind-address", "127.0.0.1:0",
				// A move's bound, which a sparse file passes (the two-moves spec).
				"--max-workspace-copy-bytes", "67108864",
				// No usage measuring: three more engine-wide disk usage
				// requests would only slow the other suites' down.
				"--usage-period", "-1s")
			cmd.Env = append(os.Environ(), "KUBECONFIG="+saConfig)
			out := gbytes.NewBuffer()
			logs[i] = out
			s, err := gexec.Start(cmd, io.MultiWriter(GinkgoWriter, out), io.MultiWriter(GinkgoWriter, out))
			Expect(err).NotTo(HaveOccurred())
			managers[i] = s
		}
		managerDirs = GinkgoT().TempDir()
		for i := range nodes {
			startManager(i)
		}
		DeferCleanup(func() {
			for _, m := range managers {
				m.Signal(syscall.SIGTERM)
			}
			for _, m := range managers {
				Eventually(m, 30*time.Second).Should(gexec.Exit())
			}
		})
		pkubectl("delete", "service", "afe-access", "-n", "afe-system")
		pkubectlStdin(fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: afe-access, namespace: afe-system}
spec:
  type: ExternalName
  externalName: localhost
  ports: [{name: https-1, port: %d}, {name: https-2, port: %d}, {name: https-3, port: %d}]
`, accessPorts[0], accessPorts[1], accessPorts[2]), "apply", "-f", "-")
		pkubectl("create", "namespace", ns)
	})

	It("runs 12 of 30 tickets of 0.5 CPU on 3 nodes of 2 CPUs, the others Pending with the scheduler's reason", func() {
		var all strings.Builder
		for i := range 30 {
			all.WriteString(ticket(fmt.Sprintf("t%02d", i), ""))
		}
		pkubectlStdin(all.String(), "apply", "-n", ns, "-f", "-")

		Eventually(func(g Gomega) {
			m := tickets()
			g.Expect(m).To(HaveLen(30))
			g.Expect(count(m, func(t placedTicket) bool { return t.phase == "Ready" && t.node != "" })).To(Equal(12), "%v", m)
			g.Expect(count(m, func(t placedTicket) bool {
				return t.phase == "Pending" && t.reason == afev1.UnschedulableReason && strings.Contains(t.message, "Insufficient cpu")
			})).To(Equal(18), "%v", m)
		}, 3*time.Minute, time.Second).Should(Succeed())

		By("placing 4 on each node, each ticket's sandbox on its own node's engine only")
		m := tickets()
		byNode := map[string][]string{}
		for name, t := range m {
			if t.node != "" {
				byNode[t.node] = append(byNode[t.node], name)
			}
		}
		engine := onEngine()
		for _, node := range nodes {
			sort.Strings(byNode[node])
			Expect(byNode[node]).To(HaveLen(4), "node %s: %v", node, byNode)
			Expect(engine[node]).To(Equal(byNode[node]), "the containers of %s's manager", node)
		}
		wide := pkubectl("get", "tickets", "-n", ns, "-o", "wide")
		Expect(strings.Fields(strings.SplitN(wide, "\n", 2)[0])).To(ContainElement("NODE"))
		Expect(wide).To(ContainSubstring(nodes[0]))
	})

	It("places the waiting tickets when others finish", func() {
		var ready []string
		for name, t := range tickets() {
			if t.phase == "Ready" {
				ready = append(ready, name)
			}
		}
		setState("Done", ready...)
		Eventually(func(g Gomega) {
			m := tickets()
			g.Expect(count(m, func(t placedTicket) bool { return t.phase == "Finished" })).To(Equal(12))
			g.Expect(count(m, func(t placedTicket) bool { return t.phase == "Ready" })).To(Equal(12), "%v", m)
			g.Expect(count(m, func(t placedTicket) bool { return t.phase == "Pending" })).To(Equal(6))
		}, 3*time.Minute, time.Second).Should(Succeed())
		// A finished ticket's placeholder is gone: its CPU is back.
		pods := pkubectl("get", "pods", "-n", ns, "-o", "name")
		Expect(strings.Fields(pods)).To(HaveLen(18))
	})

	It("requeues the tickets of a node gone NotReady with NodeLost and recreates them on the others", func() {
		// Everything but the tickets of the last node ends, so that the
		// others have room for them.
		m := tickets()
		lost := nodes[2]
		var keep, end []string
		for name, t := range m {
			switch {
			case t.phase == "Finished":
			case t.node == lost && t.phase == "Ready":
				keep = append(keep, name)
			default:
				end = append(end, name)
			}
		}
		Expect(keep).To(HaveLen(4))
		setState("Done", end...)
		Eventually(func(g Gomega) {
			g.Expect(count(tickets(), func(t placedTicket) bool { return t.phase == "Finished" })).To(Equal(26))
		}, 3*time.Minute, time.Second).Should(Succeed())

		Expect(controlplane.SetNodeReady(context.Background(), pcp.Config, lost, false)).To(Succeed())
		Eventually(func(g Gomega) {
			m := tickets()
			for _, name := range keep {
				t := m[name]
				g.Expect(t.phase).To(Equal("Ready"), "%s: %+v", name, t)
				g.Expect(t.node).To(BeElementOf(nodes[0], nodes[1]), name)
				g.Expect(pkubectl("get", "ticket", name, "-n", ns, "-o", "jsonpath={.status.requeues}/{.status.lastRequeueReason}")).To(Equal("1/NodeLost"))
			}
			engine := onEngine()
			g.Expect(engine[lost]).To(BeEmpty(), "the lost node's manager removed what it ran")
			g.Expect(append(engine[nodes[0]], engine[nodes[1]]...)).To(ConsistOf(keep))
		}, 4*time.Minute, time.Second).Should(Succeed())
		eventually("reason=" + afev1.NodeLostReason)
		setState("Done", keep...)
		Expect(controlplane.SetNodeReady(context.Background(), pcp.Config, lost, true)).To(Succeed())
	})

	It("keeps a ticket with a Folder workspace waiting for its lost node, and goes on when it is back", func() {
		ws := filepath.Join(folders, ns, "ws")
		Expect(os.MkdirAll(ws, 0o755)).To(Succeed())
		pkubectlStdin(ticket("folder", fmt.Sprintf("    workspace: {type: Folder, hostPath: %s}\n  placement:\n    nodeSelector: {afe.dev/e2e-pool: pool-2}\n", ws)),
			"apply", "-n", ns, "-f", "-")
		Eventually(func(g Gomega) {
			t := tickets()["folder"]
			g.Expect(t.phase).To(Equal("Ready"), "%+v", t)
			g.Expect(t.node).To(Equal(nodes[1]))
		}, 2*time.Minute, time.Second).Should(Succeed())

		Expect(controlplane.SetNodeReady(context.Background(), pcp.Config, nodes[1], false)).To(Succeed())
		Eventually(func(g Gomega) {
			t := tickets()["folder"]
			g.Expect(t.reason).To(Equal(afev1.NodeLostReason))
			g.Expect(t.message).To(ContainSubstring("cannot move"))
			g.Expect(t.node).To(Equal(nodes[1]))
		}, time.Minute, time.Second).Should(Succeed())
		Consistently(func() string {
			return pkubectl("get", "ticket", "folder", "-n", ns, "-o", "jsonpath={.status.requeues}")
		}, "3s").Should(BeEmpty(), "not requeued: its folder cannot move")
		Expect(onEngine()[nodes[1]]).To(ContainElement("folder-main"), "its sandbox stays where its folder is")

		Expect(controlplane.SetNodeReady(context.Background(), pcp.Config, nodes[1], true)).To(Succeed())
		Eventually(func(g Gomega) {
			t := tickets()["folder"]
			g.Expect(t.phase).To(Equal("Ready"), "%+v", t)
			g.Expect(t.node).To(Equal(nodes[1]))
		}, time.Minute, time.Second).Should(Succeed())
		setState("Done", "folder")
	})

	It("moves a ticket whose placeholder Pod was deleted while its node's manager runs, and places it again", func() {
		pkubectlStdin(ticket("evicted", ""), "apply", "-n", ns, "-f", "-")
		Eventually(func(g Gomega) {
			g.Expect(tickets()["evicted"].phase).To(Equal("Ready"))
		}, 2*time.Minute, time.Second).Should(Succeed())
		uid := pkubectl("get", "pod", "afe-placement-evicted", "-n", ns, "-o", "jsonpath={.metadata.uid}")
		pkubectl("delete", "pod", "afe-placement-evicted", "-n", ns, "--grace-period=0", "--force")
		Eventually(func(g Gomega) {
			t := tickets()["evicted"]
			g.Expect(t.phase).To(Equal("Ready"), "%+v", t)
			// Between the deletion and the new placeholder there is no
			// Pod: a failed get is tried again, not a failure.
			counts, err := exec.Command("kubectl", "--kubeconfig", pcp.Kubeconfig, "get", "ticket", "evicted", "-n", ns,
				"-o", "jsonpath={.status.moves}/{.status.requeues}").Output()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(counts)).To(Equal("1/"), "moved, not requeued")
			newUID, err := exec.Command("kubectl", "--kubeconfig", pcp.Kubeconfig, "get", "pod", "afe-placement-evicted", "-n", ns,
				"-o", "jsonpath={.metadata.uid}").Output()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(newUID)).NotTo(Equal(uid))
		}, 2*time.Minute, time.Second).Should(Succeed())
		setState("Done", "evicted")
	})

	It("keeps a ticket Pending with the API server's words when a ResourceQuota refuses its placeholder", func() {
		pkubectlStdin(`apiVersion: v1
kind: ResourceQuota
metadata: {name: cpu}
spec:
  hard: {requests.cpu: "0"}
`, "apply", "-n", ns, "-f", "-")
		// No quota controller runs here: the status it would write.
		pkubectl("patch", "resourcequota", "cpu", "-n", ns, "--subresource=status", "--type=merge",
			"-p", `{"status":{"hard":{"requests.cpu":"0"},"used":{"requests.cpu":"0"}}}`)
		pkubectlStdin(ticket("over-quota", ""), "apply", "-n", ns, "-f", "-")
		Eventually(func(g Gomega) {
			t := tickets()["over-quota"]
			g.Expect(t.phase).To(Equal("Pending"))
			g.Expect(t.reason).To(Equal(afev1.UnschedulableReason))
			g.Expect(t.message).To(ContainSubstring("exceeded quota"))
		}, time.Minute, time.Second).Should(Succeed())
		setState("Done", "over-quota")
		pkubectl("delete", "resourcequota", "cpu", "-n", ns)
	})

	It("lands a ticket with a nodeSelector only on the matching node", func() {
		pkubectlStdin(ticket("selected", "  placement:\n    nodeSelector: {afe.dev/e2e-pool: pool-3}\n"), "apply", "-n", ns, "-f", "-")
		Eventually(func(g Gomega) {
			t := tickets()["selected"]
			g.Expect(t.phase).To(Equal("Ready"))
			g.Expect(t.node).To(Equal(nodes[2]))
		}, 2*time.Minute, time.Second).Should(Succeed())
		// The earlier tickets' containers on that node may still be going.
		Eventually(func() []string { return onEngine()[nodes[2]] }, time.Minute, time.Second).Should(Equal([]string{"selected"}))

		By("a selector no node matches keeps it Pending with the scheduler's words")
		pkubectlStdin(ticket("nowhere", "  placement:\n    nodeSelector: {afe.dev/e2e-pool: none}\n"), "apply", "-n", ns, "-f", "-")
		Eventually(func(g Gomega) {
			t := tickets()["nowhere"]
			g.Expect(t.phase).To(Equal("Pending"))
			g.Expect(t.message).To(ContainSubstring("didn't match Pod's node affinity/selector"))
		}, time.Minute, time.Second).Should(Succeed())
		setState("Done", "selected", "nowhere")
	})

	It("keeps a pool's replicas on every node, each node's in its own entry, and serves a ticket from its node's members", func() {
		pkubectlStdin(fmt.Sprintf(`apiVersion: sandbox.afe.dev/v1alpha1
kind: SandboxPool
metadata: {name: warm}
spec:
  replicas: 1
  template:
    image: %s
    resources: {cpu: 500m, memory: 64Mi, pids: 64}
`, dockertest.TestImage), "apply", "-n", ns, "-f", "-")
		DeferCleanup(func() {
			pkubectl("delete", "sandboxpool", "warm", "-n", ns, "--timeout=60s")
			Eventually(func() ([]string, error) {
				return dockertest.Objects(afev1.LabelNamespace + "=" + ns + "," + afev1.LabelPool + "=warm")
			}, time.Minute, time.Second).Should(BeEmpty(), "every node's members go with the pool")
		})
		Eventually(func() string {
			return pkubectl("get", "sandboxpool", "warm", "-n", ns, "-o",
				`jsonpath={.status.ready} {.status.readyReplicas} {range .status.nodes[*]}{.node}={.readyReplicas} {end}`)
		}, time.Minute, time.Second).Should(Equal(fmt.Sprintf("3/3 3 %s=1 %s=1 %s=1", nodes[0], nodes[1], nodes[2])))

		pkubectlStdin(ticket("pooled", "    poolRef: {name: warm}\n"), "apply", "-n", ns, "-f", "-")
		var node string
		Eventually(func(g Gomega) {
			t := tickets()["pooled"]
			g.Expect(t.phase).To(Equal("Ready"))
			node = t.node
		}, 2*time.Minute, time.Second).Should(Succeed())
		got := strings.Fields(pkubectl("get", "sandbox", "pooled", "-n", ns, "-o", "jsonpath={.status.pool} {.status.containerName}"))
		Expect(got).To(HaveLen(2))
		Expect(got[0]).To(Equal("warm"))
		c, err := dockertest.Inspect(got[1])
		Expect(err).NotTo(HaveOccurred())
		Expect(c.Config.Labels).To(HaveKeyWithValue(afev1.LabelRole, afev1.RoleMember))
		Expect(c.Config.Labels).To(HaveKeyWithValue(afev1.LabelController, node), "a member of the ticket's own node")
		setState("Done", "pooled")
	})

	It("places nothing through a Pod of the placeholder's name that is not the ticket's", func() {
		// Bound by hand to a node, as anyone who may create Pods can.
		pkubectlStdin(fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: afe-placement-squatter
spec:
  nodeName: %s
  containers: [{name: c, image: x}]
`, nodes[0]), "apply", "-n", ns, "-f", "-")
		pkubectlStdin(ticket("squatter", ""), "apply", "-n", ns, "-f", "-")
		Eventually(func(g Gomega) {
			t := tickets()["squatter"]
			g.Expect(t.phase).To(Equal("Pending"))
			g.Expect(t.reason).To(Equal(afev1.PlacementConflictReason))
			g.Expect(t.node).To(BeEmpty())
		}, time.Minute, time.Second).Should(Succeed())
		Consistently(func() []string { return onEngine()[nodes[0]] }, "3s").Should(BeEmpty())

		pkubectl("delete", "pod", "afe-placement-squatter", "-n", ns, "--grace-period=0", "--force")
		Eventually(func(g Gomega) {
			g.Expect(tickets()["squatter"].phase).To(Equal("Ready"))
		}, 2*time.Minute, time.Second).Should(Succeed())
		setState("Done", "squatter")
		// Gone from the engine before the next spec looks at a node's
		// containers.
		Eventually(func() []string {
			var of []string
			for node, names := range onEngine() {
				for _, n := range names {
					if n == "squatter" {
						of = append(of, node)
					}
				}
			}
			return of
		}, time.Minute, time.Second).Should(BeEmpty(), "the nodes where squatter's sandbox container still is")
	})

	It("places nothing through a Pod a tenant made naming the ticket as its controller, and replaces it with the ticket's own", func() {
		// The node is cordoned: only a Pod bound past kube-scheduler can
		// be there.
		cordoned := nodes[2]
		pkubectl("cordon", cordoned)
		DeferCleanup(func() { pkubectl("uncordon", cordoned) })
		pkubectlStdin(fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: afe-placement-forged
  labels: {sandbox.afe.dev/placeholder: "true"}
spec:
  nodeName: %s
  containers: [{name: c, image: x}]
`, cordoned), "apply", "-n", ns, "-f", "-")
		forgedUID := pkubectl("get", "pod", "afe-placement-forged", "-n", ns, "-o", "jsonpath={.metadata.uid}")
		pkubectlStdin(ticket("forged", ""), "apply", "-n", ns, "-f", "-")
		Eventually(func() string { return tickets()["forged"].reason }, time.Minute, time.Second).Should(Equal(afev1.PlacementConflictReason))
		uid := pkubectl("get", "ticket", "forged", "-n", ns, "-o", "jsonpath={.metadata.uid}")
		pkubectl("patch", "pod", "afe-placement-forged", "-n", ns, "--type=merge", "-p", fmt.Sprintf(
			`{"metadata":{"ownerReferences":[{"apiVersion":"sandbox.afe.dev/v1alpha1","kind":"Ticket","name":"forged","uid":"%s","controller":true}]}}`, uid))

		// Never on the cordoned node; the forged Pod deleted, and the
		// ticket's own, signed, bound by the scheduler elsewhere. The
		// global Expect fails the spec at once, the first time the ticket
		// or its sandbox is seen there, not only at the end.
		Eventually(func(g Gomega) {
			Expect(tickets()["forged"].node).NotTo(Equal(cordoned), "never placed on the cordoned node")
			Expect(onEngine()[cordoned]).NotTo(ContainElement("forged"), "never placed on the cordoned node")
			pod := pkubectl("get", "pod", "afe-placement-forged", "-n", ns, "--ignore-not-found", "-o",
				`jsonpath={.metadata.uid}|{.spec.nodeName}|{.metadata.annotations.sandbox\.afe\.dev/placeholder-proof}`)
			f := strings.Split(pod, "|")
			g.Expect(f).To(HaveLen(3))
			g.Expect(f[0]).NotTo(Equal(forgedUID))
			g.Expect(f[1]).NotTo(BeEmpty())
			g.Expect(f[2]).NotTo(BeEmpty())
			t := tickets()["forged"]
			g.Expect(t.phase).To(Equal("Ready"))
			g.Expect(t.node).To(Equal(f[1]))
		}, time.Minute, 500*time.Millisecond).Should(Succeed())
		Eventually(func() string {
			return pkubectl("get", "events", "-n", ns, "--field-selector", "involvedObject.name=forged,reason="+afev1.PlacementConflictReason,
				"-o", "jsonpath={.items[*].message}")
		}, time.Minute, time.Second).Should(ContainSubstring("no manager signed it"))
		setState("Done", "forged")
	})

	It("tells a Sandbox without a Ticket that it is not placed, and makes nothing for it", func() {
		pkubectlStdin(fmt.Sprintf("apiVersion: sandbox.afe.dev/v1alpha1\nkind: Sandbox\nmetadata: {name: alone}\nspec: {image: %s}\n", dockertest.TestImage),
			"apply", "-n", ns, "-f", "-")
		Eventually(func() string {
			return pkubectl("get", "sandbox", "alone", "-n", ns, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].reason}`)
		}, time.Minute, time.Second).Should(Equal(afev1.NotPlacedReason))
		Expect(dockertest.Objects(afev1.LabelNamespace + "=" + ns + "," + afev1.LabelSandbox + "=alone")).To(BeEmpty())
		pkubectl("delete", "sandbox", "alone", "-n", ns, "--timeout=30s")
	})

	// The access API in per-node mode: every request goes through the one
	// APIService, to whichever manager it names, as a user of the
	// tickets' namespace (a ServiceAccount bound to afe-sandbox-user).
	var alice, mallory string
	afe := func(kubeconfig, stdin string, args ...string) (string, string, int) {
		cmd := exec.Command(pluginBin(), append([]string{"--kubeconfig", kubeconfig, "-n", ns}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			code = ee.ExitCode()
		} else {
			ExpectWithOffset(1, err).NotTo(HaveOccurred())
		}
		return stdout.String(), stderr.String(), code
	}
	mustAfe := func(kubeconfig, stdin string, args ...string) string {
		out, errOut, code := afe(kubeconfig, stdin, args...)
		ExpectWithOffset(1, code).To(BeZero(), "kubectl afe %s: %s%s", strings.Join(args, " "), out, errOut)
		return out
	}
	// where is what each access ticket's sandbox holds in /workspace/where:
	// the node it was created on.
	where := func(kubeconfig string, i int) string {
		return mustAfe(kubeconfig, "", "exec", fmt.Sprintf("acc%d", i+1), "--", "cat", "/workspace/where")
	}

	It("serves exec, cp, logs -f and telemetry of every node's sandboxes through the one APIService, to the namespace's user", func() {
		alice = userKubeconfig(pkubectl, pcp.Kubeconfig, managerDirs, ns, "alice")
		pkubectl("create", "namespace", ns+"-other")
		mallory = userKubeconfig(pkubectl, pcp.Kubeconfig, managerDirs, ns+"-other", "mallory")
		Eventually(func() (string, error) {
			out, err := exec.Command("kubectl", "--kubeconfig", pcp.Kubeconfig, "get", "apiservice", "v1alpha1.access.sandbox.afe.dev",
				"-o", `jsonpath={.status.conditions[?(@.type=="Available")].status}`).Output()
			return string(out), err
		}, time.Minute, time.Second).Should(Equal("True"))
		for i := range nodes {
			pkubectlStdin(ticket(fmt.Sprintf("acc%d", i+1), fmt.Sprintf("  placement:\n    nodeSelector: {afe.dev/e2e-pool: pool-%d}\n", i+1)), "apply", "-n", ns, "-f", "-")
		}
		Eventually(func(g Gomega) {
			m := tickets()
			for i, node := range nodes {
				t := m[fmt.Sprintf("acc%d", i+1)]
				g.Expect(t.phase).To(Equal("Ready"), "%+v", t)
				g.Expect(t.node).To(Equal(node))
			}
		}, 2*time.Minute, time.Second).Should(Succeed())

		blob := make([]byte, 3<<20)
		for i := range blob {
			blob[i] = byte(i*7 + i>>11)
		}
		local := filepath.Join(GinkgoT().TempDir(), "blob")
		Expect(os.WriteFile(local, blob, 0o644)).To(Succeed())
		for i, node := range nodes {
			sbx := fmt.Sprintf("acc%d", i+1)
			By("exec on " + node)
			mustAfe(alice, "", "exec", sbx, "--", "sh", "-c", "echo "+node+" > /workspace/where")
			Expect(where(alice, i)).To(Equal(node + "\n"))
			Expect(mustAfe(alice, "stdin of "+node, "exec", "-i", sbx, "--", "cat")).To(Equal("stdin of " + node))
			By("cp both ways on " + node)
			mustAfe(alice, "", "cp", local, sbx+":/workspace/blob")
			back := filepath.Join(GinkgoT().TempDir(), "back")
			mustAfe(alice, "", "cp", sbx+":/workspace/blob", back)
			got, err := os.ReadFile(back)
			Expect(err).NotTo(HaveOccurred())
			Expect(bytes.Equal(got, blob)).To(BeTrue(), "the file came back byte for byte from %s", node)
		}

		By("exec on a terminal on node 3")
		cmd := exec.Command("script", "-qec", strings.Join([]string{pluginBin(), "--kubeconfig", alice, "-n", ns, "exec", "-it", "acc3", "--", "tty"}, " "), "/dev/null")
		out, err := cmd.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "%s", out)
		Expect(string(out)).To(ContainSubstring("/dev/pts/"))

		By("logs -f of a Run on node 3")
		pkubectlStdin(`apiVersion: sandbox.afe.dev/v1alpha1
kind: Run
metadata: {name: lines}
spec:
  sandboxRef: {name: acc3}
  script: for i in 1 2 3; do echo line-$i; sleep 1; done
`, "apply", "-n", ns, "-f", "-")
		Eventually(func() string {
			out, _, _ := afe(alice, "", "logs", "-f", "lines")
			return out
		}, time.Minute, time.Second).Should(Equal("line-1\nline-2\nline-3\n"))

		By("telemetry of a ticket on node 3, gathered by node 1's manager")
		out2, errOut, code := afe(alice, "", "telemetry", "--ticket", "acc3")
		Expect(code).To(BeZero(), errOut)
		Expect(errOut).To(BeEmpty(), "every node answered")
		Expect(out2).To(ContainSubstring("cat /workspace/where"))
		Expect(out2).To(ContainSubstring("lines#1"))
		Expect(strings.Count(out2, "acc3")).To(BeNumerically(">=", 5), out2)
		Expect(mustAfe(alice, "", "telemetry", "acc2")).To(ContainSubstring("echo " + nodes[1]))
	})

	It("forwards from whichever manager the APIService names, and refuses another namespace's user there", func() {
		for _, receiver := range []int{1, 2} {
			pkubectl("patch", "apiservice", "v1alpha1.access.sandbox.afe.dev", "--type=merge",
				"-p", fmt.Sprintf(`{"spec":{"service":{"port":%d}}}`, accessPorts[receiver]))
			// A request about node 1's sandbox, forwarded by the receiver.
			Eventually(func(g Gomega) {
				out, errOut, _ := afe(alice, "", "exec", "acc1", "--", "cat", "/workspace/where")
				g.Expect(out).To(Equal(nodes[0]+"\n"), errOut)
				g.Expect(string(logs[receiver].Contents())).To(ContainSubstring("Forwarding an access request"), "node %d's manager receives", receiver+1)
			}, time.Minute, time.Second).Should(Succeed())
			for i, node := range nodes {
				Expect(where(alice, i)).To(Equal(node+"\n"), "through %s's manager", nodes[receiver])
			}
			_, errOut, code := afe(mallory, "", "exec", "acc1", "--", "true")
			Expect(code).NotTo(BeZero())
			Expect(errOut).To(ContainSubstring("forbidden"))
		}
		pkubectl("patch", "apiservice", "v1alpha1.access.sandbox.afe.dev", "--type=merge",
			"-p", fmt.Sprintf(`{"spec":{"service":{"port":%d}}}`, accessPorts[0]))

		By("routing by the placeholder Pod, never by a forged status.node")
		pkubectl("patch", "ticket", "acc1", "-n", ns, "--subresource=status", "--type=merge", "-p", `{"status":{"node":"`+nodes[2]+`"}}`)
		Expect(where(alice, 0)).To(Equal(nodes[0] + "\n"))
	})

	It("answers 503 naming the node whose manager is gone, and serves every other node", func() {
		managers[2].Kill()
		Eventually(managers[2], 30*time.Second).Should(gexec.Exit())
		_, errOut, code := afe(alice, "", "exec", "acc3", "--", "true")
		Expect(code).NotTo(BeZero())
		Expect(errOut).To(ContainSubstring(nodes[2]))
		Expect(errOut).To(Or(ContainSubstring("does not answer"), ContainSubstring("is not running")))
		Expect(where(alice, 1)).To(Equal(nodes[1] + "\n"))
		_, errOut, code = afe(alice, "", "telemetry", "--ticket", "acc2")
		Expect(code).To(BeZero(), errOut)
		Expect(errOut).To(ContainSubstring("Warning: node " + nodes[2] + " did not answer"))

		By("serving node 3 again once its manager is back")
		startManager(2)
		Eventually(func() string {
			out, _, _ := afe(alice, "", "exec", "acc3", "--", "cat", "/workspace/where")
			return out
		}, 2*time.Minute, time.Second).Should(Equal(nodes[2] + "\n"))
		setState("Done", "acc1", "acc2", "acc3")
	})

	It("moves a ticket off a drained node with its workspace byte for byte and its Runs' logs, and removes it there", func() {
		pkubectlStdin(ticket("drained", ""), "apply", "-n", ns, "-f", "-")
		Eventually(func(g Gomega) {
			g.Expect(tickets()["drained"].phase).To(Equal("Ready"))
		}, 2*time.Minute, time.Second).Should(Succeed())
		from := tickets()["drained"].node
		sbxUID := pkubectl("get", "sandbox", "drained", "-n", ns, "-o", "jsonpath={.metadata.uid}")
		// More output than status.output keeps (32 KiB): the log read
		// after the move is the one moved, not the status's tail.
		pkubectlStdin(`apiVersion: sandbox.afe.dev/v1alpha1
kind: Run
metadata: {name: writer}
spec:
  sandboxRef: {name: drained}
  script: |
    head -c 8388608 /dev/urandom > /workspace/blob
    mkdir -p /workspace/d && echo kept > /workspace/d/f && ln -s d/f /workspace/link
    sha256sum /workspace/blob > /workspace/blob.sum
    seq 1 20000
    echo written
`, "apply", "-n", ns, "-f", "-")
		Eventually(func() string {
			return pkubectl("get", "run", "writer", "-n", ns, "-o", "jsonpath={.status.phase}/{.status.exitCode}")
		}, time.Minute, time.Second).Should(Equal("Completed/0"))

		By("draining node " + from)
		pkubectl("drain", from, "--ignore-daemonsets", "--timeout=2m")
		DeferCleanup(func() { pkubectl("uncordon", from) })
		var to string
		Eventually(func(g Gomega) {
			t := tickets()["drained"]
			g.Expect(t.phase).To(Equal("Ready"), "%+v", t)
			g.Expect(t.node).NotTo(Equal(from))
			to = t.node
			g.Expect(pkubectl("get", "ticket", "drained", "-n", ns, "-o", "jsonpath={.status.moves}/{.status.requeues}")).To(Equal("1/"))
			g.Expect(pkubectl("get", "sandbox", "drained", "-n", ns, "-o", "jsonpath={.metadata.uid}/{.status.node}")).To(Equal(sbxUID + "/" + to))
		}, 3*time.Minute, time.Second).Should(Succeed())

		By("the workspace arrived whole, its files the sandbox's user's on node " + to)
		pkubectlStdin(`apiVersion: sandbox.afe.dev/v1alpha1
kind: Run
metadata: {name: checker}
spec:
  sandboxRef: {name: drained}
  script: cd /workspace && sha256sum -c blob.sum && cat link && touch blob d/f && echo owned
`, "apply", "-n", ns, "-f", "-")
		Eventually(func() string {
			return pkubectl("get", "run", "checker", "-n", ns, "-o", "jsonpath={.status.phase}/{.status.exitCode}")
		}, time.Minute, time.Second).Should(Equal("Completed/0"))
		Expect(mustAfe(alice, "", "logs", "checker")).To(Equal("/workspace/blob: OK\nkept\nowned\n"))

		By("the logs of the Run made on node " + from + " are read whole on node " + to)
		logs := mustAfe(alice, "", "logs", "writer")
		Expect(logs).To(HavePrefix("1\n2\n3\n"))
		Expect(logs).To(HaveSuffix("19999\n20000\nwritten\n"))

		By("the move is told, and nothing of the sandbox is left on node " + from)
		eventually("reason=NodeDrained")
		eventually("reason=Moved,involvedObject.name=drained")
		Eventually(func() ([]string, error) {
			return dockertest.Objects(afev1.LabelController + "=" + from + "," + afev1.LabelSandboxUID + "=" + sbxUID)
		}, time.Minute, time.Second).Should(BeEmpty())
		setState("Done", "drained")
	})

	It("moves a ticket twice in a row, each move one transfer, and refuses a sparse file past --max-workspace-copy-bytes with its attempts spaced", func() {
		// A tenant moves its ticket by changing its nodeSelector; the
		// placeholder Pod deleted has it placed again at once.
		sends := func() int {
			n := 0
			for _, out := range logs {
				for _, l := range strings.Split(string(out.Contents()), "\n") {
					if strings.Contains(l, "Sending a workspace to the node its ticket moved to") && sendsOf.MatchString(l) {
						n++
					}
				}
			}
			return n
		}
		moveTo := func(pool string) {
			pkubectl("patch", "ticket", "twice", "-n", ns, "--type=merge", "-p", `{"spec":{"placement":{"nodeSelector":{"afe.dev/e2e-pool":"`+pool+`"}}}}`)
			pkubectl("delete", "pod", "afe-placement-twice", "-n", ns, "--grace-period=0", "--force")
		}
		readyOn := func(node, moves string) {
			EventuallyWithOffset(1, func(g Gomega) {
				t := tickets()["twice"]
				g.Expect(t.phase).To(Equal("Ready"), "%+v", t)
				g.Expect(t.node).To(Equal(node))
				g.Expect(pkubectl("get", "ticket", "twice", "-n", ns, "-o", "jsonpath={.status.moves}")).To(Equal(moves))
				g.Expect(pkubectl("get", "sandbox", "twice", "-n", ns, "-o", "jsonpath={.status.node}")).To(Equal(node))
			}, 3*time.Minute, time.Second).Should(Succeed())
		}
		pkubectlStdin(ticket("twice", "  placement:\n    nodeSelector: {afe.dev/e2e-pool: pool-1}\n"), "apply", "-n", ns, "-f", "-")
		readyOn(nodes[0], "")
		run := func(name, script string) {
			pkubectlStdin(fmt.Sprintf("apiVersion: sandbox.afe.dev/v1alpha1\nkind: Run\nmetadata: {name: %s}\nspec:\n  sandboxRef: {name: twice}\n  script: %q\n", name, script),
				"apply", "-n", ns, "-f", "-")
			EventuallyWithOffset(1, func() string {
				return pkubectl("get", "run", name, "-n", ns, "-o", "jsonpath={.status.phase}/{.status.exitCode}")
			}, time.Minute, time.Second).Should(Equal("Completed/0"))
		}
		run("twice-write", "echo kept > /workspace/f")

		By("a first move, to node " + nodes[1])
		moveTo("pool-2")
		readyOn(nodes[1], "1")
		Expect(sends()).To(Equal(1))
		By("a second move, to node " + nodes[2] + ", with an arrival record left on node " + nodes[1] + " (as a move cut short leaves it): it transfers once")
		// The record as node 2's manager writes it: its workspace volume's
		// labels, in the role of a move's helper volumes.
		key := naming.Key(ns, "twice")
		out, err := exec.Command("docker", "volume", "inspect", "-f", "{{json .Labels}}", naming.Volume(key)).Output()
		Expect(err).NotTo(HaveOccurred())
		labels := map[string]string{}
		Expect(json.Unmarshal(out, &labels)).To(Succeed())
		Expect(labels[afev1.LabelController]).To(Equal(nodes[1]))
		labels[afev1.LabelRole] = afev1.RoleSnapshotCopy
		create := []string{"volume", "create"}
		for k, v := range labels {
			create = append(create, "--label", k+"="+v)
		}
		Expect(exec.Command("docker", append(create, naming.MoveVerified(key, nodes[1]))...).Run()).To(Succeed())
		moveTo("pool-3")
		readyOn(nodes[2], "2")
		Expect(sends()).To(Equal(2))
		run("twice-check", "cat /workspace/f")
		Expect(pkubectl("get", "run", "twice-check", "-n", ns, "-o", "jsonpath={.status.output}")).To(Equal("kept"))
		Eventually(func() ([]string, error) {
			return dockertest.Objects(afev1.LabelRole + "=" + afev1.RoleSnapshotCopy + "," + afev1.LabelNamespace + "=" + ns + "," + afev1.LabelSandbox + "=twice")
		}, 30*time.Second, time.Second).Should(BeEmpty(), "no record or staging volume of either move is left")

		By("a sparse file of 300 MB, a few KiB on disk, is refused past the managers' 64 MiB bound, not written whole")
		run("twice-sparse", "truncate -s 300M /workspace/sparse && test $(du -k /workspace/sparse | cut -f1) -lt 1024")
		moveTo("pool-1")
		condition := func() string {
			return pkubectl("get", "sandbox", "twice", "-n", ns, "-o",
				`jsonpath={.status.conditions[?(@.type=="WorkspaceReady")].reason}: {.status.conditions[?(@.type=="WorkspaceReady")].message}`)
		}
		Eventually(condition, 2*time.Minute, 200*time.Millisecond).Should(And(HavePrefix(afev1.NodeDrainedReason+": "),
			ContainSubstring("--max-workspace-copy-bytes (67108864 bytes)")))
		refused := sends()
		By("its transfers tried again after 2 s, then 4 s, not at the pace of the engine's events")
		Consistently(sends, 9*time.Second, time.Second).Should(BeNumerically("<=", refused+2))
		Expect(tickets()["twice"].phase).NotTo(Equal("Ready"))
		setState("Done", "twice")
	})

	It("restores a ticket whose node was lost from its newest snapshot, which a manager that still answers keeps", func() {
		pkubectlStdin(ticket("kept", ""), "apply", "-n", ns, "-f", "-")
		Eventually(func(g Gomega) {
			g.Expect(tickets()["kept"].phase).To(Equal("Ready"))
		}, 2*time.Minute, time.Second).Should(Succeed())
		lost := tickets()["kept"].node
		run := func(name, body string) {
			pkubectlStdin(fmt.Sprintf("apiVersion: sandbox.afe.dev/v1alpha1\nkind: Run\nmetadata: {name: %s}\nspec:\n  sandboxRef: {name: kept}\n%s", name, body),
				"apply", "-n", ns, "-f", "-")
			EventuallyWithOffset(1, func() string {
				return pkubectl("get", "run", name, "-n", ns, "-o", "jsonpath={.status.phase}/{.status.exitCode}")
			}, time.Minute, time.Second).Should(Equal("Completed/0"))
		}
		// Two snapshots, the workspace changed after each: the newest is
		// what comes back.
		run("kept-a", "  script: echo one > /workspace/a && mkdir /workspace/d && ln -s ../a /workspace/d/link\n")
		run("kept-snap-1", "  builtin: Snapshot\n")
		run("kept-a2", "  script: echo two > /workspace/a\n")
		run("kept-snap-2", "  builtin: Snapshot\n")
		run("kept-b", "  script: echo after > /workspace/b\n")

		By("losing node " + lost + ", whose manager still answers")
		Expect(controlplane.SetNodeReady(context.Background(), pcp.Config, lost, false)).To(Succeed())
		DeferCleanup(func() { Expect(controlplane.SetNodeReady(context.Background(), pcp.Config, lost, true)).To(Succeed()) })
		Eventually(func(g Gomega) {
			t := tickets()["kept"]
			g.Expect(t.phase).To(Equal("Ready"), "%+v", t)
			g.Expect(t.node).NotTo(Equal(lost))
			g.Expect(pkubectl("get", "ticket", "kept", "-n", ns, "-o", "jsonpath={.status.requeues}/{.status.lastRequeueReason}")).To(Equal("1/NodeLost"))
			// Its reason and message read together: one condition's.
			g.Expect(pkubectl("get", "sandbox", "kept", "-n", ns, "-o",
				`jsonpath={.status.conditions[?(@.type=="WorkspaceReady")].reason}: {.status.conditions[?(@.type=="WorkspaceReady")].message}`)).
				To(And(HavePrefix(afev1.RestoredFromSnapshotReason+": "), ContainSubstring("of node "+lost)))
		}, 4*time.Minute, time.Second).Should(Succeed())

		By("the workspace is the newest snapshot's, its files the new sandbox's user's")
		run("kept-check", "  script: cd /workspace && cat a d/link && test ! -e b && touch a && echo owned\n")
		Expect(mustAfe(alice, "", "logs", "kept-check")).To(Equal("two\ntwo\nowned\n"))
		eventually("reason=Restored,involvedObject.name=kept")
		By("and no helper that read the snapshot out is left")
		Eventually(func() ([]string, error) {
			return dockertest.Objects(afev1.LabelController + "=" + lost + "," + afev1.LabelRole + "=" + afev1.RoleSnapshotCopy)
		}, time.Minute, time.Second).Should(BeEmpty())
		setState("Done", "kept")
	})

	It("leaves nothing on the engine, and no placeholder, once every ticket is done", func() {
		Eventually(func(g Gomega) {
			g.Expect(count(tickets(), func(t placedTicket) bool { return t.phase != "Finished" })).To(BeZero())
			g.Expect(pkubectl("get", "pods", "-n", ns, "-o", "name")).To(BeEmpty())
			for _, node := range nodes {
				g.Expect(dockertest.Objects(afev1.LabelController + "=" + node)).To(BeEmpty())
			}
		}, 3*time.Minute, time.Second).Should(Succeed())
		By("with no request of the managers refused by the roles config/per-node ships")
		for i, out := range logs {
			Expect(bytes.Contains(out.Contents(), []byte("forbidden"))).To(BeFalse(), "%s: the API server refused a request:\n%s",
				nodes[i], grepLines(string(out.Contents()), "forbidden"))
		}
	})
})

// sendsOf finds the sandbox "twice" in a manager's log line.
var sendsOf = regexp.MustCompile(`"sandbox":\s*"twice"`)

// freePort is a loopback port free a moment ago.
func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// userKubeconfig is a kubeconfig of the control plane as the
// ServiceAccount name of namespace, bound to afe-sandbox-user there, in
// dir.
func userKubeconfig(k func(args ...string) string, admin, dir, namespace, name string) string {
	k("create", "serviceaccount", name, "-n", namespace)
	k("create", "rolebinding", name+"-sandbox-user", "-n", namespace, "--clusterrole=afe-sandbox-user", "--serviceaccount="+namespace+":"+name)
	token := k("create", "token", name, "-n", namespace, "--duration", "2h")
	raw, err := os.ReadFile(admin)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	path := filepath.Join(dir, name+".kubeconfig")
	ExpectWithOffset(1, os.WriteFile(path, raw, 0o600)).To(Succeed())
	for _, args := range [][]string{
		{"config", "set-credentials", name, "--token", token},
		{"config", "set-context", "--current", "--user", name},
	} {
		ExpectWithOffset(1, exec.Command("kubectl", append([]string{"--kubeconfig", path}, args...)...).Run()).To(Succeed())
	}
	return path
}
