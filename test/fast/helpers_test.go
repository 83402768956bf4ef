package fast

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/naming"
	"afe.dev/sandbox/test/kubetest"
)

// newNamespace creates a namespace for one spec, left in place (namespaces
// never finish deleting without kube-controller-manager).
func newNamespace(ctx context.Context) string { return kubetest.NewNamespace(ctx, k8sClient, "fast-") }

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
	return kubetest.GetSandbox(ctx, k8sClient, sbx)
}

func waitReady(ctx context.Context, sbx *afev1.Sandbox) *afev1.Sandbox {
	return kubetest.WaitReady(ctx, k8sClient, sbx)
}

// waitCondition waits for a condition of the sandbox with the status and
// reason, and returns the sandbox as it was then.
func waitCondition(ctx context.Context, sbx *afev1.Sandbox, condType string, status metav1.ConditionStatus, reason string) *afev1.Sandbox {
	return kubetest.WaitCondition(ctx, k8sClient, sbx, condType, status, reason)
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
