// Package kubetest holds what the suites on envtest share: the test
// control plane with the project's CRDs, a namespace for each spec, and the
// waits on a Sandbox's status. The waits use Gomega's defaults, which each
// suite sets.
package kubetest

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/test/testenv"
)

// Environment is a test control plane with the project's CRDs
// (config/crd/bases, which must be there) and the binaries `make envtest`
// built (testenv.AssetsDir). The caller starts it.
func Environment() (*envtest.Environment, error) {
	root, err := testenv.Root()
	if err != nil {
		return nil, err
	}
	assets, err := testenv.AssetsDir()
	if err != nil {
		return nil, err
	}
	return &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
	}, nil
}

var nsCounter atomic.Int32

// NewNamespace creates a namespace for one spec, named prefix and a number
// of this process's, and leaves it in place (namespaces never finish
// deleting without kube-controller-manager).
func NewNamespace(ctx context.Context, c client.Client, prefix string) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s%d", prefix, nsCounter.Add(1))}}
	gomega.ExpectWithOffset(1, c.Create(ctx, ns)).To(gomega.Succeed())
	return ns.Name
}

// GetSandbox reads the Sandbox, for Eventually.
func GetSandbox(ctx context.Context, c client.Client, sbx *afev1.Sandbox) func(gomega.Gomega) *afev1.Sandbox {
	return func(g gomega.Gomega) *afev1.Sandbox {
		got := &afev1.Sandbox{}
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(sbx), got)).To(gomega.Succeed())
		return got
	}
}

// WaitReady waits until the Sandbox is Ready, its condition and its phase,
// and returns it as it was then.
func WaitReady(ctx context.Context, c client.Client, sbx *afev1.Sandbox) *afev1.Sandbox {
	var got *afev1.Sandbox
	gomega.EventuallyWithOffset(1, func(g gomega.Gomega) {
		got = GetSandbox(ctx, c, sbx)(g)
		g.Expect(apimeta.IsStatusConditionTrue(got.Status.Conditions, afev1.SandboxReadyCondition)).To(gomega.BeTrue(), "conditions: %+v", got.Status.Conditions)
		g.Expect(got.Status.Phase).To(gomega.Equal(afev1.SandboxReady))
	}).Should(gomega.Succeed())
	return got
}

// WaitCondition waits for a condition of the Sandbox with the status and
// reason, and returns the Sandbox as it was then.
func WaitCondition(ctx context.Context, c client.Client, sbx *afev1.Sandbox, condType string, status metav1.ConditionStatus, reason string) *afev1.Sandbox {
	var got *afev1.Sandbox
	gomega.EventuallyWithOffset(1, func(g gomega.Gomega) {
		got = GetSandbox(ctx, c, sbx)(g)
		cond := apimeta.FindStatusCondition(got.Status.Conditions, condType)
		g.Expect(cond).NotTo(gomega.BeNil(), "conditions: %+v", got.Status.Conditions)
		g.Expect(cond.Status).To(gomega.Equal(status), "condition: %+v", cond)
		g.Expect(cond.Reason).To(gomega.Equal(reason), "condition: %+v", cond)
	}).Should(gomega.Succeed())
	return got
}

// BindUser binds the user to the ClusterRole in ns and waits until the API
// server's authorizer allows the user the role's first rule there: it sees
// a new binding from its cache a moment after its creation, and a request
// made before would be refused.
func BindUser(ctx context.Context, c client.Client, user, ns, role string) {
	gomega.ExpectWithOffset(1, c.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user + "-" + role},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	})).To(gomega.Succeed())
	cr := &rbacv1.ClusterRole{}
	gomega.ExpectWithOffset(1, c.Get(ctx, client.ObjectKey{Name: role}, cr)).To(gomega.Succeed())
	gomega.ExpectWithOffset(1, cr.Rules).NotTo(gomega.BeEmpty())
	rule := cr.Rules[0]
	gomega.EventuallyWithOffset(1, func(g gomega.Gomega) {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user,
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: ns, Verb: rule.Verbs[0], Group: rule.APIGroups[0], Resource: rule.Resources[0],
			},
		}}
		g.Expect(c.Create(ctx, sar)).To(gomega.Succeed())
		g.Expect(sar.Status.Allowed).To(gomega.BeTrue(), "%s is not yet allowed by %s in %s", user, role, ns)
	}).WithTimeout(30 * time.Second).WithPolling(100 * time.Millisecond).Should(gomega.Succeed())
}

// AwaitAPIService waits until the aggregator calls the APIService of that
// name Available (a manager registered its access API and answers it).
func AwaitAPIService(ctx context.Context, c client.Client, name string) {
	gomega.EventuallyWithOffset(1, func(g gomega.Gomega) {
		as := &unstructured.Unstructured{}
		as.SetAPIVersion("apiregistration.k8s.io/v1")
		as.SetKind("APIService")
		g.Expect(c.Get(ctx, client.ObjectKey{Name: name}, as)).To(gomega.Succeed())
		conds, _, _ := unstructured.NestedSlice(as.Object, "status", "conditions")
		g.Expect(conds).To(gomega.ContainElement(gomega.And(
			gomega.HaveKeyWithValue("type", "Available"), gomega.HaveKeyWithValue("status", "True"))))
	}).WithTimeout(2 * time.Minute).Should(gomega.Succeed())
}
