// Command bench measures the controller against the plain Docker CLI doing
// the same work in the same run, and prints one Markdown table; in its
// output folder it leaves the table, the samples behind it as JSON and
// figures drawn from them (PNG and SVG). `make bench` runs it; it starts a
// local control plane and the manager binary itself, and uses the local
// Docker engine.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/hack/controlplane"
)

// config sizes the run: `make bench` uses the defaults, the smoke test in
// `make test` tiny ones.
type config struct {
	Assets, Manager, Plugin, CRDs, Image, ProxyImage, Out string

	Reps, EgressReps, Tickets, LossReps, RunReps, ResumeReps, Idle int
	// EgressScale is how many Sandboxes with egress are created at once.
	EgressScale int
	// PlacementTickets is how many Tickets the placement scenario creates
	// at once in per-node mode, on 1 node and then on 3.
	PlacementTickets int
	// PoolTickets is how many Tickets the pool scenario creates at once
	// from a pool of as many members.
	PoolTickets int
	IdleFor     time.Duration
	// Resync is the manager's --resync-period.
	Resync                time.Duration
	Parallel, Concurrency int
	Profile               bool
	// UserTickets are the sizes of the user scenario's bursts of Tickets;
	// Kubectl times them with kubectl apply and kubectl wait.
	UserTickets []int
	Kubectl     bool
	// RuntimeReps is how many times each timing of runsc against runc is
	// taken under each runtime; RuntimeFiles the size of the syscall-heavy
	// tree; RuntimeIdle the idle sandboxes per runtime whose memory is
	// measured.
	RuntimeReps, RuntimeFiles, RuntimeIdle int
	// Scenarios are the names of the scenarios to run; empty runs all.
	Scenarios []string
}

func main() {
	cfg := config{}
	flag.StringVar(&cfg.Assets, "assets", os.Getenv("KUBEBUILDER_ASSETS"), "The folder of kube-apiserver and etcd.")
	flag.StringVar(&cfg.Manager, "manager", "bin/manager", "The manager binary.")
	flag.StringVar(&cfg.Plugin, "plugin", "bin/kubectl-afe", "The kubectl plugin binary (the exec scenario).")
	flag.StringVar(&cfg.CRDs, "crds", "config/crd/bases", "The CRD folder.")
	flag.StringVar(&cfg.Image, "image", "afe/busybox:dev", "The sandbox image.")
	flag.StringVar(&cfg.ProxyImage, "proxy-image", "afe/egress-proxy:dev", "The egress proxy image.")
	flag.StringVar(&cfg.Out, "out", "bin/bench", "Where the table (results.md, results.json), the figures, the manager's log and the profiles go.")
	flag.IntVar(&cfg.Reps, "reps", 10, "Repetitions of one sandbox without egress.")
	flag.IntVar(&cfg.EgressReps, "egress-reps", 5, "Repetitions of one sandbox with egress.")
	flag.IntVar(&cfg.Tickets, "tickets", 50, "Tickets created at once, then set Done.")
	flag.IntVar(&cfg.LossReps, "loss-reps", 10, "Containers removed by hand.")
	flag.IntVar(&cfg.RunReps, "run-reps", 20, "Runs of true.")
	flag.IntVar(&cfg.ResumeReps, "resume-reps", 5, "Runs that resume an idle-suspended sandbox.")
	flag.IntVar(&cfg.Idle, "idle", 100, "Ready sandboxes left idle.")
	flag.IntVar(&cfg.EgressScale, "egress-scale", 500, "Sandboxes with egress created at once (each a network and a proxy), then deleted.")
	flag.IntVar(&cfg.PoolTickets, "pool-tickets", 20, "Tickets created at once from a warm pool of as many members, against the plain script in parallel.")
	flag.IntVar(&cfg.PlacementTickets, "placement-tickets", 20, "Tickets created at once in per-node mode (kube-scheduler places them), on 3 nodes against 1, then set Done.")
	flag.DurationVar(&cfg.IdleFor, "idle-for", time.Minute, "How long they are left idle.")
	flag.DurationVar(&cfg.Resync, "resync-period", 30*time.Second,
		"The manager's --resync-period: shorter than its default 2m, so that the idle minute holds two sweeps (and would show any per-sandbox resync).")
	flag.IntVar(&cfg.Parallel, "parallel", 4, "Commands the parallel CLI baseline runs at once.")
	flag.IntVar(&cfg.Concurrency, "max-concurrent-reconciles", 8, "The manager's --max-concurrent-reconciles (its default).")
	flag.BoolVar(&cfg.Profile, "profile", false, "Save CPU and heap profiles of the manager, and CPU profiles of the API server (apiserver-*.pprof), in -out.")
	flag.IntVar(&cfg.RuntimeReps, "runtime-reps", 5, "Repetitions of each timing of runsc against runc, under each runtime.")
	flag.IntVar(&cfg.RuntimeFiles, "runtime-files", 10000, "Small files in the syscall-heavy tree (tar, git commit) of runsc against runc.")
	flag.IntVar(&cfg.RuntimeIdle, "runtime-idle", 5, "Idle sandboxes per runtime whose host memory is measured.")
	userTickets := flag.String("user-tickets", "20,50", "Tickets created at once in the user scenario, against the plain docker run script; a comma-separated list of sizes.")
	flag.BoolVar(&cfg.Kubectl, "kubectl", true, "The user scenario applies its Tickets with kubectl and waits with kubectl wait, as a user does (false: the bench's client and a watch).")
	scenarios := flag.String("scenarios", "", "Comma-separated scenarios to run (sandbox, egress, pool, loss, run, resume, exec, runtimes, tickets, user, idle, egress-scale, placement, forward); empty runs all.")
	flag.Parse()
	for _, f := range strings.Split(*userTickets, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			fmt.Fprintln(os.Stderr, "bench: -user-tickets takes a comma-separated list of positive counts")
			os.Exit(2)
		}
		cfg.UserTickets = append(cfg.UserTickets, n)
	}
	if cfg.PlacementTickets <= 0 {
		fmt.Fprintln(os.Stderr, "bench: -placement-tickets takes a positive count")
		os.Exit(2)
	}
	if *scenarios != "" {
		cfg.Scenarios = strings.Split(*scenarios, ",")
	}
	if err := benchmark(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// benchmark runs the benchmark, prints the table and writes it with the
// samples and figures into -out, also when it stopped half-way.
func benchmark(cfg config) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rows, err := run(ctx, cfg, os.Stderr)
	if len(rows) > 0 {
		writeTable(os.Stdout, rows)
		written, werr := writeResults(cfg.Out, rows)
		for _, name := range written {
			fmt.Fprintln(os.Stderr, "bench: wrote", filepath.Join(cfg.Out, name))
		}
		err = joinErr(err, werr)
	}
	return err
}

// bench is one run: a control plane, a manager, a namespace, the engine.
type bench struct {
	cfg      config
	log      io.Writer
	c        client.WithWatch
	engine   *docker.Client
	instance string
	// cliInstance labels the baseline's objects.
	cliInstance string
	ns          string
	egressNet   string
	manager     *exec.Cmd
	kubeconfig  string
	metricsAddr string
	pprofAddr   string
	// apiserver reaches the API server's own endpoints (its profile).
	apiserver rest.Interface
}

func (b *bench) logf(format string, args ...any) {
	_, _ = fmt.Fprintf(b.log, time.Now().Format("15:04:05.000 ")+format+"\n", args...)
}

// run sets everything up, runs the scenarios in order and tears down.
// Long on purpose: the set-up, each scenario and the tear-down in the
// order they run, so that what a scenario may rely on is read in one place.
func run(ctx context.Context, cfg config, log io.Writer) (rows []row, err error) {
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return nil, err
	}
	// The namespace is the run's own, as its instance is: a container is
	// named for its sandbox's namespace and name, and one that a killed
	// run left would otherwise hold the name of this run's sandbox (which
	// the controller refuses to adopt, so that it never became Ready).
	instance := fmt.Sprintf("bench-%d", os.Getpid())
	b := &bench{cfg: cfg, log: log, ns: instance, instance: instance,
		cliInstance: fmt.Sprintf("bench-cli-%d", os.Getpid())}
	b.egressNet = "afe-" + b.instance + "-egress"

	engine, err := docker.New("")
	if err != nil {
		return nil, err
	}
	defer func() { _ = engine.Close() }()
	b.engine = engine
	if err := engine.Ping(ctx); err != nil {
		return nil, fmt.Errorf("the Docker engine: %w", err)
	}
	labels := map[string]string{afev1.LabelController: b.instance}
	if _, err := engine.EnsureNetwork(ctx, docker.NetworkSpec{Name: b.egressNet, Labels: labels}); err != nil {
		return nil, err
	}
	defer func() { err = joinErr(err, b.removeDocker()) }()

	dir, err := os.MkdirTemp("", "afe-bench-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	// envtest logs through controller-runtime's logger. The bench shows
	// none of it, and without a logger controller-runtime prints a warning
	// with a stack once 30 s have passed, as when the placement scenario
	// starts its own control plane late in a run.
	ctrllog.SetLogger(logr.Discard())
	b.logf("starting a local control plane")
	cp, err := controlplane.Start(dir, cfg.Assets, cfg.CRDs)
	if err != nil {
		return nil, err
	}
	defer func() { _ = cp.Stop() }()
	if err := afev1.AddToScheme(scheme.Scheme); err != nil {
		return nil, err
	}
	// The bench's own requests must not wait on client-side rate limits:
	// 50 Tickets are created at once.
	cfgREST := rest.CopyConfig(cp.Config)
	cfgREST.QPS, cfgREST.Burst = 1000, 1000
	if b.c, err = client.NewWithWatch(cfgREST, client.Options{Scheme: scheme.Scheme}); err != nil {
		return nil, err
	}
	if b.apiserver, err = rest.UnversionedRESTClientFor(withCodecs(cfgREST)); err != nil {
		return nil, err
	}
	if err := b.createNamespace(ctx); err != nil {
		return nil, err
	}
	if err := b.startManager(cp.Kubeconfig); err != nil {
		return nil, err
	}
	defer b.stopManager()

	if err := b.warmUp(ctx); err != nil {
		return nil, err
	}
	scenarios := []struct {
		name string
		run  func(context.Context) ([]row, error)
	}{
		{"sandbox", b.oneSandbox},
		{"egress", b.oneSandboxWithEgress},
		{"pool", b.poolSandboxes},
		{"loss", b.loss},
		{"run", b.runTrue},
		{"resume", b.resume},
		{"exec", b.execTrue},
		{"runtimes", b.runtimes},
		{"tickets", b.manyTickets},
		{"user", b.userTickets},
		{"idle", b.idle},
		{"egress-scale", b.egressScale},
		{"placement", b.placement},
		{"forward", b.forward},
	}
	for _, s := range scenarios {
		if len(cfg.Scenarios) > 0 && !slices.Contains(cfg.Scenarios, s.name) {
			continue
		}
		r, err := s.run(ctx)
		for i := range r {
			r[i].Key = s.name
		}
		rows = append(rows, r...)
		if err != nil {
			return rows, err
		}
		if err := b.drain(ctx); err != nil {
			return rows, err
		}
	}
	return rows, nil
}

// warmUp makes and removes one sandbox with egress, so that the first
// measurement does not include the manager's start (its caches filling).
func (b *bench) warmUp(ctx context.Context) error {
	sbx, _, err := b.createSandbox(ctx, "warm-up", []afev1.EgressHost{"example.com"})
	if err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	if err := b.deleteSandbox(ctx, sbx); err != nil {
		return err
	}
	return b.drain(ctx)
}

// startManager runs the manager binary as `make run` does, with its metrics
// and pprof endpoints on loopback.
func (b *bench) startManager(kubeconfig string) error {
	b.metricsAddr, b.pprofAddr = freeAddr(), freeAddr()
	logFile, err := os.Create(filepath.Join(b.cfg.Out, "manager.log"))
	if err != nil {
		return err
	}
	args := []string{
		"--instance", b.instance,
		"--metrics-bind-address", b.metricsAddr,
		"--health-probe-bind-address", "0",
		"--egress-network", b.egressNet,
		"--proxy-image", b.cfg.ProxyImage,
		"--max-concurrent-reconciles", fmt.Sprint(b.cfg.Concurrency),
		"--resync-period", b.cfg.Resync.String(),
		// runsc against runc (the runtimes scenario).
		"--runtimes", strings.Join(benchRuntimes[:], ","),
		"--zap-time-encoding", "rfc3339nano",
		// The access API, as make run serves it.
		"--access-bind-address", "127.0.0.1:0",
		"--access-register",
		"--access-external-name", "localhost",
	}
	if b.cfg.Profile {
		args = append(args, "--pprof-bind-address", b.pprofAddr)
	}
	b.kubeconfig = kubeconfig
	b.manager = exec.Command(b.cfg.Manager, args...)
	b.manager.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	b.manager.Stdout, b.manager.Stderr = logFile, logFile
	b.logf("starting %s %s", b.cfg.Manager, strings.Join(args, " "))
	if err := b.manager.Start(); err != nil {
		return err
	}
	return waitHTTP("http://"+b.metricsAddr+"/metrics", 30*time.Second)
}

func (b *bench) stopManager() { stopProcess(b.manager) }

// stopProcess ends a manager the bench started as a rollout would, with
// SIGTERM (it finishes its reconciles and releases what it holds), or
// SIGKILL after 30 s, and waits for it.
func stopProcess(cmd *exec.Cmd) {
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// removeDocker removes every object of the run, the controller's and the
// baseline's, whatever happened.
func (b *bench) removeDocker() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return removeLabelled(ctx, b.engine, map[string]string{afev1.LabelController: b.instance},
		map[string]string{afev1.LabelController: b.cliInstance})
}
