package controllers

import (
	"context"
	"encoding/json"
	"os"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/telemetry"
	"afe.dev/sandbox/test/dockertest"
)

// The manager's own environment: only what --env-passthrough lists enters a
// sandbox, and only where a Sandbox asks for it.
var _ = Describe("Environment passthrough", func() {
	var ctx context.Context
	var ns string
	BeforeEach(func() {
		ctx = context.Background()
		ns = newNamespace(ctx)
	})

	It("passes a listed variable byte for byte, refuses the rest, and lets no other variable of the manager out", func() {
		// A canary in the manager's environment (this process's), listed
		// nowhere.
		const canaryName, canary = "AFE_TEST_CANARY", "canary-7f3a1c-never-in-a-sandbox"
		Expect(os.Setenv(canaryName, canary)).To(Succeed())
		DeferCleanup(func() { _ = os.Unsetenv(canaryName) })

		sbx := newSandbox(ns, "pass")
		sbx.Spec.Env = []afev1.EnvVar{{Name: "INDEX", ValueFrom: &afev1.EnvVarSource{ControllerEnv: testPassthrough}}}
		Expect(k8sClient.Create(ctx, sbx)).To(Succeed())
		DeferCleanup(func() { deleteAndWaitGone(ctx, sbx) })
		ready := waitReady(ctx, sbx)
		run := newRun(ns, "env", sbx.Name)
		run.Spec.Script = `printf %s "$INDEX"`
		Expect(k8sClient.Create(ctx, run)).To(Succeed())
		got := waitRunPhase(ctx, run, afev1.RunCompleted)
		Expect(got.Status.Output).To(Equal(testPassthroughValue), "byte for byte")
		all := inContainer(ready.Status.ContainerName, `cat /proc/1/environ | tr '\0' '\n'; echo; env`)
		Expect(all).NotTo(ContainSubstring("INDEX="), "given to the Run's exec, not held by the container")
		Expect(all).NotTo(ContainSubstring(testPassthroughValue))
		Expect(all).NotTo(ContainSubstring(testPassthrough))

		By("refusing a name the list does not hold, one listed but unset, and one the deny list holds")
		for name, want := range map[string]string{
			canaryName:       afev1.ControllerEnvNotAllowedReason,
			"AFE_TEST_UNSET": afev1.ControllerEnvNotAllowedReason,
			"HOME":           afev1.ControllerEnvNotAllowedReason,
			"EXTRA_DENIED":   afev1.DeniedEnvReason,
		} {
			bad := newSandbox(ns, "refused-"+strings.ToLower(strings.ReplaceAll(name, "_", "-")))
			bad.Spec.Env = []afev1.EnvVar{{Name: "X", ValueFrom: &afev1.EnvVarSource{ControllerEnv: name}}}
			Expect(k8sClient.Create(ctx, bad)).To(Succeed())
			c := waitCondition(ctx, bad, afev1.ContainerReadyCondition, "False", want)
			Expect(c.Message).To(ContainSubstring(name))
			Expect(dockertest.Objects(uidLabel(bad))).To(BeEmpty(), "nothing is created for %s", name)
			deleteAndWaitGone(ctx, bad)
		}
		By("refusing secretKeyRef and controllerEnv together at admission")
		both := newSandbox(ns, "both")
		both.Spec.Env = []afev1.EnvVar{{Name: "X", ValueFrom: &afev1.EnvVarSource{ControllerEnv: testPassthrough,
			SecretKeyRef: &afev1.SecretKeySelector{Name: "s", Key: "k"}}}}
		Expect(k8sClient.Create(ctx, both)).To(MatchError(ContainSubstring("set one of secretKeyRef and controllerEnv")))

		By("finding the canary nowhere: not in the sandbox, its Run, its status, nor any Event")
		Expect(all).NotTo(ContainSubstring(canary))
		Expect(got.Status.Output).NotTo(ContainSubstring(canary))
		// Events are written on their own, after what they tell: the list
		// is read once it holds the Run's end (its Completed Event).
		events := &corev1.EventList{}
		Eventually(func(g Gomega) []string {
			g.Expect(k8sClient.List(ctx, events, client.InNamespace(ns))).To(Succeed())
			var reasons []string
			for _, e := range events.Items {
				if e.InvolvedObject.UID == got.UID {
					reasons = append(reasons, e.Reason)
				}
			}
			return reasons
		}).Should(ContainElement("Completed"))
		for _, e := range events.Items {
			Expect(e.Message).NotTo(ContainSubstring(canary))
			Expect(e.Message).NotTo(ContainSubstring(testPassthroughValue))
		}
		By("and in no telemetry record, while the Run's record is there")
		Expect(testTelemetry.Flush(ctx)).To(Succeed())
		records, err := testTelemetry.List(ctx, telemetry.Filter{Namespace: ns, Sandbox: sbx.Name})
		Expect(err).NotTo(HaveOccurred())
		Expect(records).To(ContainElement(HaveField("Run", run.Name)), "the positive control: the Run was recorded")
		for _, r := range records {
			b, err := json.Marshal(r)
			Expect(err).NotTo(HaveOccurred())
			Expect(string(b)).NotTo(ContainSubstring(canary))
			Expect(string(b)).NotTo(ContainSubstring(testPassthroughValue))
		}
		list := &afev1.SandboxList{}
		Expect(k8sClient.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		for _, s := range list.Items {
			for _, c := range s.Status.Conditions {
				Expect(c.Message).NotTo(ContainSubstring(canary))
				Expect(c.Message).NotTo(ContainSubstring(testPassthroughValue))
			}
		}
	})
})
