package fast

import (
	"context"
	"fmt"
	"sync/atomic"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/naming"
)

var nsCounter atomic.Int32

// newNamespace creates a namespace for one spec, left in place (namespaces
// never finish deleting without kube-controller-manager).
func newNamespace(ctx context.Context) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("fast-%d", nsCounter.Add(1))}}
	Expect(k8sClient.Create(ctx, ns)).To(Succeed())
	return ns.Name
}

func newSandbox(ns, name string, egress ...afev1.EgressHost) *afev1.Sandbox {
	return &afev1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: afev1.SandboxSpec{SandboxTemplateSpec: afev1.SandboxTemplateSpec{
			Image:  testImage,
			Egress: egress,
			Resources: afev1.SandboxResources{
				CPU: ptr.To(resource.MustParse("500m")), Memory: ptr.To(resource.MustParse("128Mi")), Pids: 64,
			},
		}},
	}
}

// create creates the object and deletes it when the spec ends.
func create(ctx context.Context, obj client.Object) {
	Expect(k8sClient.Create(ctx, obj)).To(Succeed())
	DeferCleanup(func(ctx context.Context) {
		Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, obj))).To(Succeed())
	})
}

func getSandbox(ctx context.Context, sbx *afev1.Sandbox) func(Gomega) *afev1.Sandbox {
	return func(g Gomega) *afev1.Sandbox {
		got := &afev1.Sandbox{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(sbx), got)).To(Succeed())
		return got
	}
}

func waitReady(ctx context.Context, sbx *afev1.Sandbox) *afev1.Sandbox {
	var got *afev1.Sandbox
	Eventually(func(g Gomega) {
		got = getSandbox(ctx, sbx)(g)
		g.Expect(apimeta.IsStatusConditionTrue(got.Status.Conditions, afev1.SandboxReadyCondition)).To(BeTrue(), "conditions: %+v", got.Status.Conditions)
		g.Expect(got.Status.Phase).To(Equal(afev1.SandboxReady))
	}).Should(Succeed())
	return got
}

// waitCondition waits for a condition of the sandbox with the status and
// reason, and returns the sandbox as it was then.
func waitCondition(ctx context.Context, sbx *afev1.Sandbox, condType string, status metav1.ConditionStatus, reason string) *afev1.Sandbox {
	var got *afev1.Sandbox
	Eventually(func(g Gomega) {
		got = getSandbox(ctx, sbx)(g)
		c := apimeta.FindStatusCondition(got.Status.Conditions, condType)
		g.Expect(c).NotTo(BeNil(), "conditions: %+v", got.Status.Conditions)
		g.Expect(c.Status).To(Equal(status), "condition: %+v", c)
		g.Expect(c.Reason).To(Equal(reason), "condition: %+v", c)
	}).Should(Succeed())
	return got
}

// key is the key of the Docker names of a sandbox.
func key(sbx *afev1.Sandbox) string { return naming.Key(sbx.Namespace, sbx.Name) }

// container inspects a container on the fake engine; nil when it is gone.
func container(ctx context.Context, name string) *docker.Container {
	c, err := engine.InspectContainer(ctx, name)
	if err != nil {
		Expect(err).To(MatchError(docker.ErrNotFound))
		return nil
	}
	return c
}

// foreignLabels are the labels of an object of the sandbox's namespace and
// name made by another controller instance: never adopted, never removed.
func foreignLabels(sbx *afev1.Sandbox, role string) map[string]string {
	return map[string]string{
		afev1.LabelController: "another-instance", afev1.LabelNamespace: sbx.Namespace, afev1.LabelSandbox: sbx.Name,
		afev1.LabelSandboxUID: "uid-of-another", afev1.LabelRole: role,
	}
}

// objectsOf lists the fake engine's objects of a sandbox of this instance.
func objectsOf(sbx *afev1.Sandbox) []string {
	return engine.Objects(map[string]string{afev1.LabelController: instance, afev1.LabelNamespace: sbx.Namespace, afev1.LabelSandbox: sbx.Name})
}

// conditionStatus is the status of a condition of the sandbox, "" when it has none.
func conditionStatus(sbx *afev1.Sandbox, condType string) metav1.ConditionStatus {
	if c := apimeta.FindStatusCondition(sbx.Status.Conditions, condType); c != nil {
		return c.Status
	}
	return ""
}
