package client_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	"afe.dev/sandbox/access"
	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/controllers"
	"afe.dev/sandbox/hack/controlplane"
	"afe.dev/sandbox/internal/runlog"
	"afe.dev/sandbox/internal/telemetry"
	"afe.dev/sandbox/internal/usage"
	"afe.dev/sandbox/test/dockertest"
	"afe.dev/sandbox/test/kubetest"
)

// The suite runs the controllers and the access API on envtest, as the
// manager does, against the real engine, behind an aggregating API server
// (controlplane.EnableAggregation): the client reaches the access API the way
// it does on a cluster. Every Docker object it makes carries the suite's
// afe.controller label and is removed at the end.
var (
	testEnv       *envtest.Environment
	adminClient   ctrlclient.Client
	cancelManager context.CancelFunc
	instance      = fmt.Sprintf("client-envtest-%d", os.Getpid())
	// alice may work in nsA, bob in nsB (afe-sandbox-user).
	alice, bob *rest.Config
	nsA, nsB   string
	// measuredUsage is what the access API serves as sandboxusages.
	measuredUsage = &usage.Store{}
)

func TestClient(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Go client Suite")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	SetDefaultEventuallyTimeout(60 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)

	_, skip, err := dockertest.Require()
	Expect(err).NotTo(HaveOccurred())
	if skip != "" {
		Skip(skip)
	}
	Expect(afev1.AddToScheme(scheme.Scheme)).To(Succeed())
	testEnv, err = kubetest.Environment()
	Expect(err).NotTo(HaveOccurred())
	testEnv.ControlPlane.APIServer = &envtest.APIServer{}
	Expect(controlplane.EnableAggregation(testEnv.ControlPlane.APIServer, GinkgoT().TempDir())).To(Succeed())
	adminConfig, err := testEnv.Start()
	Expect(err).NotTo(HaveOccurred())
	adminClient, err = ctrlclient.New(adminConfig, ctrlclient.Options{Scheme: scheme.Scheme})
	Expect(err).NotTo(HaveOccurred())
	startManager(adminConfig)

	By("giving alice and bob afe-sandbox-user, each in a namespace of their own")
	applyAccessRoles(context.Background())
	nsA, nsB = newNamespace("alice"), newNamespace("bob")
	alice, bob = addUser("alice", nsA), addUser("bob", nsB)
})

// startManager runs the controllers and the access API, and waits for the
// aggregator to call the access API available.
func startManager(cfg *rest.Config) {
	engine, _, err := dockertest.Require()
	Expect(err).NotTo(HaveOccurred())
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	Expect(err).NotTo(HaveOccurred())
	var ctx context.Context
	ctx, cancelManager = context.WithCancel(context.Background())
	runLogs := &runlog.Store{Dir: GinkgoT().TempDir()}
	store, err := telemetry.Open(filepath.Join(GinkgoT().TempDir(), "telemetry.db"), telemetry.Options{})
	Expect(err).NotTo(HaveOccurred())
	// The specs put the figures into the store (top_test.go): the
	// collector measures nothing.
	Expect(controllers.SetupAll(ctx, mgr, engine, controllers.Options{
		Instance: instance, RunLogs: runLogs, Telemetry: store, Usage: measuredUsage, UsagePeriod: -1, ResyncPeriod: 30 * time.Second,
		MaxConcurrentReconciles: 2, ProxyImage: "afe/egress-proxy:dev", EgressNetwork: "bridge", Runtimes: dockertest.Runtimes(),
	})).To(Succeed())
	server, err := access.New(mgr, engine, access.Options{
		BindAddress: "127.0.0.1:0", Service: types.NamespacedName{Namespace: "afe-system", Name: "afe-access"},
		Register: true, ExternalName: "localhost", Instance: instance, MaxFileBytes: 64 << 20,
		SpoolDir: GinkgoT().TempDir(), RunLogs: runLogs, Telemetry: store, Usage: measuredUsage,
	})
	Expect(err).NotTo(HaveOccurred())
	Expect(mgr.Add(server)).To(Succeed())
	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
	kubetest.AwaitAPIService(ctx, adminClient, access.APIServiceName)
}

var _ = AfterSuite(func() {
	if cancelManager != nil {
		cancelManager()
	}
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
	dockertest.RemoveAll(afev1.LabelController + "=" + instance)
})

// applyAccessRoles creates the ClusterRoles of config/rbac/access_roles.yaml
// as they are shipped.
func applyAccessRoles(ctx context.Context) {
	data, err := os.ReadFile(filepath.Join("..", "config", "rbac", "access_roles.yaml"))
	Expect(err).NotTo(HaveOccurred())
	for _, doc := range strings.Split(string(data), "\n---\n") {
		role := &rbacv1.ClusterRole{}
		Expect(yaml.UnmarshalStrict([]byte(doc), role)).To(Succeed())
		Expect(adminClient.Create(ctx, role)).To(Succeed())
	}
}

func newNamespace(prefix string) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	Expect(adminClient.Create(context.Background(), ns)).To(Succeed())
	return ns.Name
}

// addUser is a user of the API server (a client certificate) bound to
// afe-sandbox-user in ns.
func addUser(name, ns string) *rest.Config {
	return addUserWithRole(name, ns, "afe-sandbox-user")
}

// addUserWithRole is a user bound to the ClusterRole in ns.
func addUserWithRole(name, ns, role string) *rest.Config {
	u, err := testEnv.AddUser(envtest.User{Name: name}, nil)
	Expect(err).NotTo(HaveOccurred())
	kubetest.BindUser(context.Background(), adminClient, name, ns, role)
	return u.Config()
}

func keyOf(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}
