// Package fast is the fast tier of the controller tests: the reconcilers of
// controllers.SetupAll on envtest (a real API server), against the
// in-memory engine of test/fakeengine instead of Docker. It covers the
// branches a real engine makes slow or hard to reach (a name taken, no
// address pool left, a failed pull, the engine away, a loss while a
// workspace is restored from its snapshot); the paths they lie on are also
// tested against the real engine in controllers/ or test/e2e. `make
// test-fast` runs it without Docker.
package fast

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/controllers"
	"afe.dev/sandbox/test/fakeengine"
	"afe.dev/sandbox/test/kubetest"
)

// Images present on the fake engine.
const (
	testImage  = "afe/busybox:dev"
	proxyImage = "afe/egress-proxy:dev"
)

// instance is the --instance of the suite's manager.
const instance = "fast"

var (
	testEnv       *envtest.Environment
	k8sClient     client.Client
	engine        *fakeengine.Engine
	cancelManager context.CancelFunc
)

func TestFast(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Fast Suite (fake engine)")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(50 * time.Millisecond)

	Expect(afev1.AddToScheme(scheme.Scheme)).To(Succeed())
	var err error
	testEnv, err = kubetest.Environment()
	Expect(err).NotTo(HaveOccurred())
	cfg, err := testEnv.Start()
	Expect(err).NotTo(HaveOccurred())
	k8sClient, err = client.New(cfg, client.Options{Scheme: scheme.Scheme})
	Expect(err).NotTo(HaveOccurred())

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	Expect(err).NotTo(HaveOccurred())
	engine = fakeengine.New(testImage, proxyImage)
	var ctx context.Context
	ctx, cancelManager = context.WithCancel(context.Background())
	Expect(controllers.SetupAll(ctx, mgr, engine, controllers.Options{
		Instance: instance,
		// The periodic resync (the sweep) is the fallback for a loss
		// nothing reported; it comes later than any spec waits, so that
		// each spec sees the mechanism meant for its branch (the event
		// stream, its resync on reconnecting, a requeue) and not the
		// fallback. controllers/sweep_test.go tests the sweep.
		ResyncPeriod:            10 * time.Minute,
		SweepPeriod:             10 * time.Minute,
		MaxConcurrentReconciles: 4,
		MaxPoolReplicas:         3,
		EgressNetwork:           "bridge",
		ProxyImage:              proxyImage,
	})).To(Succeed())
	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
})

var _ = AfterSuite(func() {
	if cancelManager != nil {
		cancelManager()
	}
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})
