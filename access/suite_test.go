package access_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
// manager does, against the real engine. Its API server is an aggregator
// (controlplane.EnableAggregation), so every request of a user goes the way it
// goes on a cluster: the API server authenticates and authorizes the user,
// and proxies to the access API with its front-proxy certificate.
var (
	testEnv       *envtest.Environment
	adminClient   client.Client
	adminConfig   *rest.Config
	accessServer  *access.Server
	cancelManager context.CancelFunc
	// testManager is the suite's manager, testEngine its engine.
	testManager ctrl.Manager
	testEngine  access.Engine
	// store is the manager's command telemetry.
	store    *telemetry.Store
	instance = fmt.Sprintf("access-envtest-%d", os.Getpid())
	// users: alice may work in nsA, bob in nsB (afe-sandbox-user).
	alice, bob *rest.Config
	nsA, nsB   string
	// spoolDir is the access API's SpoolDir.
	spoolDir string
)

// forEachRuntime declares the specs of body once for each runtime of
// dockertest.Runtimes (AFE_TEST_RUNTIMES), in a container named after it
// and labelled with it: exec, shell, cp and telemetry hold under every
// runtime the suite is asked for. body gets the runtime's name, for
// spec.runtime; decorators (Ordered) go on each container.
func forEachRuntime(body func(runtime string), decorators ...interface{}) {
	for _, rt := range dockertest.Runtimes() {
		args := append([]interface{}{Label("runtime-" + rt)}, decorators...)
		Context("under "+rt, append(args, func() { body(rt) })...)
	}
}

// maxFileBytes is the suite's --access-max-file-bytes: a 50 MiB file fits.
const maxFileBytes = 64 << 20

// usagePeriod is the suite's --usage-period (the manager takes no less
// than 30 s).
const usagePeriod = 5 * time.Second

func TestAccess(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Access API Suite")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	SetDefaultEventuallyTimeout(60 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)

	engine, skip, err := dockertest.Require()
	Expect(err).NotTo(HaveOccurred())
	if skip != "" {
		Skip(skip)
	}
	// A runtime the suite is asked to run under and the engine lacks is a
	// failure, never a skip.
	Expect(dockertest.RequireRuntimes(engine)).To(Succeed())
	Expect(afev1.AddToScheme(scheme.Scheme)).To(Succeed())
	testEnv, err = kubetest.Environment()
	Expect(err).NotTo(HaveOccurred())
	testEnv.ControlPlane.APIServer = &envtest.APIServer{}
	Expect(controlplane.EnableAggregation(testEnv.ControlPlane.APIServer, GinkgoT().TempDir())).To(Succeed())
	adminConfig, err = testEnv.Start()
	Expect(err).NotTo(HaveOccurred())
	adminClient, err = client.New(adminConfig, client.Options{Scheme: scheme.Scheme})
	Expect(err).NotTo(HaveOccurred())

	mgr, err := ctrl.NewManager(adminConfig, ctrl.Options{
		Scheme:                 scheme.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	Expect(err).NotTo(HaveOccurred())
	var ctx context.Context
	ctx, cancelManager = context.WithCancel(context.Background())
	runLogs := &runlog.Store{Dir: GinkgoT().TempDir()}
	store, err = telemetry.Open(filepath.Join(GinkgoT().TempDir(), "telemetry.db"), telemetry.Options{})
	Expect(err).NotTo(HaveOccurred())
	measured := &usage.Store{}
	Expect(controllers.SetupAll(ctx, mgr, engine, controllers.Options{
		Instance:                instance,
		RunLogs:                 runLogs,
		Telemetry:               store,
		Usage:                   measured,
		UsagePeriod:             usagePeriod,
		ResyncPeriod:            30 * time.Second,
		MaxConcurrentReconciles: 2,
		ProxyImage:              "afe/egress-proxy:dev",
		Runtimes:                dockertest.Runtimes(),
	})).To(Succeed())
	spoolDir = GinkgoT().TempDir()
	accessServer, err = access.New(mgr, engine, access.Options{
		BindAddress:  "127.0.0.1:0",
		Service:      types.NamespacedName{Namespace: "afe-system", Name: "afe-access"},
		Register:     true,
		ExternalName: "localhost",
		Instance:     instance,
		MaxFileBytes: maxFileBytes,
		SpoolDir:     spoolDir,
		RunLogs:      runLogs,
		Telemetry:    store,
		Usage:        measured,
	})
	Expect(err).NotTo(HaveOccurred())
	Expect(mgr.Add(accessServer)).To(Succeed())
	testManager, testEngine = mgr, engine
	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(ctx)).To(Succeed())
	}()

	By("waiting for the aggregator to call the access API available")
	kubetest.AwaitAPIService(ctx, adminClient, access.APIServiceName)

	By("giving alice and bob afe-sandbox-user, each in a namespace of their own")
	applyAccessRoles(ctx)
	nsA, nsB = newNamespace(ctx, "alice"), newNamespace(ctx, "bob")
	alice, bob = addUser("alice", nsA), addUser("bob", nsB)
})

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

func newNamespace(ctx context.Context, prefix string) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	Expect(adminClient.Create(ctx, ns)).To(Succeed())
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

// readySandbox creates a Sandbox in ns (under the engine's default runtime)
// and waits until it is Ready.
func readySandbox(ctx context.Context, ns, name string) {
	readySandboxUnder(ctx, ns, name, "", nil)
}

// readySandboxUnder creates a Sandbox in ns with spec.runtime (empty: the
// manager's default), changed by edit if not nil, and waits until it is
// Ready.
func readySandboxUnder(ctx context.Context, ns, name, runtime string, edit func(*afev1.Sandbox)) *afev1.Sandbox {
	sbx := &afev1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: afev1.SandboxSpec{SandboxTemplateSpec: afev1.SandboxTemplateSpec{
			Image: dockertest.TestImage, User: "1000:1000", Runtime: runtime,
		}},
	}
	if edit != nil {
		edit(sbx)
	}
	Expect(adminClient.Create(ctx, sbx)).To(Succeed())
	Eventually(func(g Gomega) {
		g.Expect(adminClient.Get(ctx, client.ObjectKeyFromObject(sbx), sbx)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(sbx.Status.Conditions, afev1.SandboxReadyCondition)).To(BeTrue())
	}).Should(Succeed())
	return sbx
}

// accessGet GETs the access API's path (its elements after the group and
// version) with the raw query, through the API server as the config's
// user.
func accessGet(ctx context.Context, cfg *rest.Config, rawQuery string, elems ...string) *http.Response {
	base, _, err := rest.DefaultServerUrlFor(cfg)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	u := *base
	u.Path, u.RawQuery = path.Join(append([]string{"/apis", access.Group, access.Version}, elems...)...), rawQuery
	hc, err := rest.HTTPClientFor(cfg)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	resp, err := hc.Do(req)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return resp
}

// anonymous reaches the API server with no credentials.
func anonymous() *rest.Config {
	return &rest.Config{Host: adminConfig.Host, TLSClientConfig: rest.TLSClientConfig{CAData: adminConfig.CAData}}
}
