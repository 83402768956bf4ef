package controllers

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"afe.dev/sandbox/access"
	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/connlimit"
	"afe.dev/sandbox/internal/hostgroups"
	"afe.dev/sandbox/internal/sandboxspec"
	"afe.dev/sandbox/internal/subnets"
	"afe.dev/sandbox/internal/telemetry"
	"afe.dev/sandbox/test/dockertest"
	"afe.dev/sandbox/test/kubetest"
	"afe.dev/sandbox/test/testenv"
	"afe.dev/sandbox/test/wsroot"
)

var (
	testEnv       *envtest.Environment
	k8sClient     client.Client
	cancelManager context.CancelFunc
	// instance labels every Docker object of this suite run.
	instance      = fmt.Sprintf("envtest-%d", os.Getpid())
	workspaceRoot string
	// egressNetwork stands for the outside world: the suite's test servers
	// live there, under names such as allowed.test.
	egressNetwork = fmt.Sprintf("afe-envtest-egress-%d", os.Getpid())
	// testConnLimits is the manager's conntrack bound (its table on the host).
	testConnLimits *connlimit.Host
)

// The suite's user policy: testDeniedGID is on --deny-gids, and uids and
// gids must lie in testAllowedIDs (--allowed-uids, --allowed-gids), which
// leaves out the groups of Runs.
const testDeniedGID = 4711

var testAllowedIDs = sandboxspec.IDRanges{{Min: 1, Max: 60000}, sandboxspec.DefaultSandboxIDs}

// missingRuntime is on the suite manager's --runtimes and on no engine:
// its sandboxes are RuntimeUnavailable.
const missingRuntime = "afe-test-missing"

// testEngine is the suite's client of the engine.
var testEngine *docker.Client

// forEachRuntime declares the specs of body once for each runtime of
// dockertest.Runtimes (AFE_TEST_RUNTIMES), in a container named after it
// and labelled with it: the boundary specs hold under every runtime the
// suite is asked for. body gets the runtime's name, for spec.runtime.
func forEachRuntime(body func(runtime string)) {
	for _, rt := range dockertest.Runtimes() {
		Context("under "+rt, Label("runtime-"+rt), func() { body(rt) })
	}
}

// userSpaceKernel tells whether the runtime is a user-space kernel (gVisor),
// for the few checks that differ there (docs/threat-model.md).
func userSpaceKernel(runtime string) bool { return dockertest.UserSpaceKernel(testEngine, runtime) }

// testTelemetry is the suite manager's command telemetry.
var testTelemetry *telemetry.Store

// The suite's --env-passthrough: testPassthrough, with a value of quotes,
// a newline, a dollar and non-ASCII bytes, and AFE_TEST_UNSET, listed but
// not set.
const (
	testPassthrough      = "AFE_TEST_PASSTHROUGH"
	testPassthroughValue = "index \"quoted\" $HOME\n\tsecond line é"
)

func TestControllers(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Controller Suite")
}

// assetsDir is where `make envtest` puts kube-apiserver and etcd.
func assetsDir() string {
	d, err := testenv.AssetsDir()
	Expect(err).NotTo(HaveOccurred())
	return d
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

	Expect(dockertest.RequireRuntimes(engine)).To(Succeed())
	testEngine = engine

	Expect(afev1.AddToScheme(scheme.Scheme)).To(Succeed())
	testEnv = &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assetsDir(),
		ControlPlane:          envtest.ControlPlane{APIServer: &envtest.APIServer{}},
	}
	Expect(configureAPIServer(testEnv.ControlPlane.APIServer, GinkgoT().TempDir())).To(Succeed())
	cfg, err := testEnv.Start()
	Expect(err).NotTo(HaveOccurred())
	testConfig = cfg
	k8sClient, err = client.New(cfg, client.Options{Scheme: scheme.Scheme})
	Expect(err).NotTo(HaveOccurred())

	// A root mounted nosuid,nodev, as the manager asks of --workspace-root.
	var cleanupRoot func() error
	workspaceRoot, cleanupRoot, err = wsroot.Make(true)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(cleanupRoot()).To(Succeed()) })

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	Expect(err).NotTo(HaveOccurred())
	Expect(startTestServers(engine)).To(Succeed())
	// The conntrack bound as the manager installs it, with limits no spec
	// comes near; AfterSuite's RemoveAll deletes its table.
	testConnLimits, err = connlimit.New(instance, connlimit.Limits{Rate: 1000, Burst: 10000, Max: 10000}, nil)
	Expect(err).NotTo(HaveOccurred())
	egress, err := engine.InspectNetwork(context.Background(), egressNetwork)
	Expect(err).NotTo(HaveOccurred())
	Expect(testConnLimits.Install(context.Background(), egress.Bridge)).To(Succeed())
	// The user policy as the manager computes it, plus testDeniedGID (a gid
	// the allowed ranges admit, so only the deny list refuses it).
	denyGIDs, err := hostgroups.NewDenyList(strconv.Itoa(testDeniedGID), hostgroups.SocketPath(engine.Host()), "/etc/group")
	Expect(err).NotTo(HaveOccurred())
	telemetryDir, err := os.MkdirTemp("", "afe-telemetry-")
	Expect(err).NotTo(HaveOccurred())
	testTelemetry, err = telemetry.Open(filepath.Join(telemetryDir, "telemetry.db"), telemetry.Options{})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		_ = testTelemetry.Close()
		_ = os.RemoveAll(telemetryDir)
	})
	var ctx context.Context
	ctx, cancelManager = context.WithCancel(context.Background())
	Expect(SetupAll(ctx, mgr, engine, Options{
		Instance:                instance,
		WorkspaceRoot:           workspaceRoot,
		DenyEnv:                 []string{"EXTRA_DENIED"},
		ResyncPeriod:            30 * time.Second,
		SweepPeriod:             2 * time.Second,
		UsagePeriod:             5 * time.Second,
		DiskCheckPeriod:         time.Second,
		MaxInodes:               DefaultMaxInodes,
		MaxConcurrentReconciles: 4,
		MaxPoolReplicas:         testMaxPoolReplicas,
		EgressNetwork:           egressNetwork,
		ConnLimits:              testConnLimits,
		EgressAllowPrivate:      true, // the test servers have private addresses
		// The manager's default: each of the suite's processes, and any
		// other controller on the engine, shares it.
		EgressSubnets:  mustParseSubnets(subnets.Default),
		ProxyImage:     testProxyImage(),
		DenyGIDs:       denyGIDs,
		AllowedUIDs:    testAllowedIDs,
		AllowedGIDs:    testAllowedIDs,
		EnvPassthrough: map[string]*string{testPassthrough: ptr.To(testPassthroughValue), "AFE_TEST_UNSET": nil},
		Telemetry:      testTelemetry,
		Executions:     &telemetry.Executions{},
		Runtimes:       append(dockertest.Runtimes(), missingRuntime),
		Usage:          testUsage,
	})).To(Succeed())
	Expect(addAccessAPI(mgr, engine)).To(Succeed())
	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
	kubetest.AwaitAPIService(ctx, k8sClient, access.APIServiceName)
})

func mustParseSubnets(s string) []netip.Prefix {
	p, err := subnets.Parse(s)
	Expect(err).NotTo(HaveOccurred())
	return p
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

// testProxyImage is the proxy image of the suite's manager: AFE_PROXY_IMAGE,
// so that a candidate built under another tag can be tried, or
// afe/egress-proxy:dev (make images).
func testProxyImage() string {
	if img := os.Getenv("AFE_PROXY_IMAGE"); img != "" {
		return img
	}
	return "afe/egress-proxy:dev"
}

// serialMarker is AFE_SERIAL_MARKER: a file the suite makes as its first
// Serial spec starts. Ginkgo runs the Serial specs last, on process 1 alone,
// once every parallel spec has ended, so the other processes' cores are
// free from then on: `make test` starts the e2e suite beside them then.
var (
	serialMarker     = os.Getenv("AFE_SERIAL_MARKER")
	serialMarkerOnce sync.Once
)

var _ = BeforeEach(func() {
	if serialMarker != "" && CurrentSpecReport().IsSerial {
		serialMarkerOnce.Do(func() {
			Expect(os.WriteFile(serialMarker, nil, 0o644)).To(Succeed())
		})
	}
})
