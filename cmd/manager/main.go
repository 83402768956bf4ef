// Command manager runs the afe sandbox controller.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	_ "k8s.io/client-go/plugin/pkg/client/auth"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/controllers"
	"afe.dev/sandbox/docker"
)

var scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(afev1.AddToScheme(scheme))
	// The engine's request count, beside the controller's own metrics
	// (internal/metrics, which links no Docker SDK).
	crmetrics.Registry.MustRegister(docker.Requests)
}

func main() {
	if len(os.Args) == 2 && os.Args[1] == "pause" {
		os.Exit(pause())
	}
	os.Exit(run())
}

// pauseReady is what pause prints once a SIGTERM ends it.
const pauseReady = "afe placeholder: holding this ticket's place until stopped"

// pause is the placeholder Pods' command in per-node mode: it holds the
// ticket's place on its node, doing nothing until it is stopped.
func pause() int {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	// From here on a SIGTERM ends it (before, as PID 1, it would be ignored
	// and the kubelet would kill it after the grace period).
	fmt.Println(pauseReady)
	<-stop
	return 0
}

// run starts the manager and returns its exit code: its flags are read
// (flags.go), the options they give checked, against the engine where they
// name it, and the reconcilers, the access API and the health checks added
// to the manager (setup.go), as Cluster API's main does.
func run() int {
	f := bindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&f.zap)))
	log := ctrl.Log.WithName("setup")
	if err := start(log, f); err != nil {
		logSetupError(log, err)
		return 1
	}
	return 0
}

// start checks the options, builds the manager and runs it until it stops.
func start(log logr.Logger, f *managerFlags) error {
	if err := setupOptions(log, f); err != nil {
		return err
	}
	ctx := ctrl.SetupSignalHandler()
	engine, err := docker.New(f.dockerHost)
	if err != nil {
		return setupFailed(err, "Cannot configure the Docker client")
	}
	defer func() { _ = engine.Close() }()
	if err := setupPolicy(f, engine.Host()); err != nil {
		return err
	}
	if err := checkEngine(ctx, log, engine, f.opts); err != nil {
		return err
	}
	if err := setupConnLimits(ctx, log, engine, f); err != nil {
		return err
	}
	mgr, err := newManager(f)
	if err != nil {
		return setupFailed(err, "Cannot create the manager")
	}
	if err := setupRecords(log, mgr, f); err != nil {
		return err
	}
	if err := setupPlacementKey(ctx, mgr, f); err != nil {
		return err
	}
	moves := setupMoves(f)
	if err := controllers.SetupAll(ctx, mgr, engine, f.opts); err != nil {
		return setupFailed(err, "Cannot set up the controllers")
	}
	if err := setupAccess(ctx, mgr, engine, f, moves); err != nil {
		return err
	}
	if err := setupChecks(mgr, engine); err != nil {
		return err
	}
	if err := setupStateMetrics(mgr, engine); err != nil {
		return err
	}
	log.Info("Starting the manager", "docker", engine.Host(), "instance", f.opts.Instance)
	warnWorkspaceRoot(log, f.opts, engine.IsLocal(), engine.Host())
	if err := mgr.Start(ctx); err != nil {
		return setupFailed(err, "The manager stopped")
	}
	return nil
}
