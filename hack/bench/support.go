package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/docker"
)

func joinErr(errs ...error) error { return errors.Join(errs...) }

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

func waitHTTP(url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		resp, err := http.Get(url)
		if err == nil {
			_ = resp.Body.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer within %s: %w", url, timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (b *bench) createNamespace(ctx context.Context) error {
	return b.createNamespaceNamed(ctx, b.ns)
}

// createNamespaceNamed makes the namespace name unless it exists.
func (b *bench) createNamespaceNamed(ctx context.Context, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := b.c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// inParallel calls f(0..n-1), at most width at a time, and returns the
// first error.
func inParallel(n, width int, f func(i int) error) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	next := make(chan int)
	for range max(1, width) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(i); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return errors.Join(errs...)
}

// watcher records when objects of one kind in the bench's namespace first
// satisfy a condition. Start it before creating or changing them.
type watcher struct {
	w watch.Interface
}

func (b *bench) watch(ctx context.Context, list client.ObjectList) (*watcher, error) {
	w, err := b.c.Watch(ctx, list, client.InNamespace(b.ns))
	if err != nil {
		return nil, err
	}
	return &watcher{w: w}, nil
}

// until returns when each of names was first seen satisfying ok (or, with a
// nil ok, deleted).
func (w *watcher) until(ctx context.Context, timeout time.Duration, names []string, ok func(client.Object) bool) (map[string]time.Time, error) {
	defer w.w.Stop()
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	seen := map[string]time.Time{}
	deadline := time.After(timeout)
	for len(seen) < len(want) {
		select {
		case ev, open := <-w.w.ResultChan():
			if !open {
				return seen, errors.New("watch closed")
			}
			obj, isObj := ev.Object.(client.Object)
			if !isObj || !want[obj.GetName()] {
				continue
			}
			if _, done := seen[obj.GetName()]; done {
				continue
			}
			if (ok == nil && ev.Type == watch.Deleted) || (ok != nil && ev.Type != watch.Deleted && ok(obj)) {
				seen[obj.GetName()] = time.Now()
			}
		case <-deadline:
			return seen, fmt.Errorf("%d of %d not there within %s", len(want)-len(seen), len(want), timeout)
		case <-ctx.Done():
			return seen, ctx.Err()
		}
	}
	return seen, nil
}

func sandboxReady(o client.Object) bool {
	return hasCondition(o.(*afev1.Sandbox).Status.Conditions, afev1.SandboxReadyCondition)
}

func ticketReady(o client.Object) bool {
	return hasCondition(o.(*afev1.Ticket).Status.Conditions, afev1.TicketReadyCondition)
}

func runEnded(o client.Object) bool { return o.(*afev1.Run).Status.Phase.Terminal() }

func hasCondition(conds []metav1.Condition, t string) bool {
	for _, c := range conds {
		if c.Type == t {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}

// labelled counts the Docker objects carrying the labels.
func labelled(ctx context.Context, e *docker.Client, labels map[string]string) (int, error) {
	cs, err := e.ListContainers(ctx, labels)
	if err != nil {
		return 0, err
	}
	ns, err := e.ListNetworks(ctx, labels)
	if err != nil {
		return 0, err
	}
	vs, err := e.ListVolumes(ctx, labels)
	if err != nil {
		return 0, err
	}
	return len(cs) + len(ns) + len(vs), nil
}

// removeLabelled removes every Docker object carrying one of the label
// sets: every set's containers first, then the networks and the volumes,
// since a network of one set may hold the containers of another (the
// bench's egress network, the CLI baseline's proxies); for an instance's
// set, its conntrack table too.
func removeLabelled(ctx context.Context, e *docker.Client, sets ...map[string]string) error {
	var errs []error
	for _, labels := range sets {
		if instance := labels[afev1.LabelController]; instance != "" {
			// The conntrack bound's table, which a manager leaves when it
			// stops (internal/connlimit); none when it ran without one.
			_ = exec.CommandContext(ctx, "nft", "delete", "table", "ip", "afe-"+instance).Run()
		}
	}
	for _, labels := range sets {
		cs, err := e.ListContainers(ctx, labels)
		errs = append(errs, err)
		for _, c := range cs {
			errs = append(errs, e.RemoveContainer(ctx, c.ID))
		}
	}
	for _, labels := range sets {
		ns, err := e.ListNetworks(ctx, labels)
		errs = append(errs, err)
		for _, n := range ns {
			errs = append(errs, e.RemoveNetwork(ctx, n.Name))
		}
		vs, err := e.ListVolumes(ctx, labels)
		errs = append(errs, err)
		for _, v := range vs {
			errs = append(errs, e.RemoveVolume(ctx, v.Name))
		}
	}
	return errors.Join(errs...)
}

// drain deletes every Run, Ticket and Sandbox of the namespace and waits
// until the controller has removed all their Docker objects.
func (b *bench) drain(ctx context.Context) error {
	for _, obj := range []client.Object{&afev1.Run{}, &afev1.Ticket{}, &afev1.Sandbox{}} {
		if err := b.c.DeleteAllOf(ctx, obj, client.InNamespace(b.ns)); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		sandboxes := &afev1.SandboxList{}
		if err := b.c.List(ctx, sandboxes, client.InNamespace(b.ns)); err != nil {
			return err
		}
		n, err := labelled(ctx, b.engine, map[string]string{afev1.LabelController: b.instance, afev1.LabelNamespace: b.ns})
		if err != nil {
			return err
		}
		if len(sandboxes.Items) == 0 && n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("drain: %d Sandboxes and %d Docker objects left after 3 minutes", len(sandboxes.Items), n)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// dockerRequests scrapes the manager's afe_docker_requests_total by
// operation.
func (b *bench) dockerRequests() (map[string]float64, error) {
	all, err := b.counters()
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for k, v := range all {
		if op, ok := strings.CutPrefix(k, "docker:"); ok {
			out[op] = v
		}
	}
	return out, nil
}

// settle waits, at least 5 s and at most limit, until the manager's last
// work on what was just made has ended: two seconds in which it made no
// Docker request but the sweep's lists, the usage collector's disk
// measurement and a ping. A fixed wait was too short on a machine busy
// with other tests: the idle window then counted a late reconcile.
func (b *bench) settle(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	time.Sleep(3 * time.Second)
	for {
		before, err := b.dockerRequests()
		if err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
		after, err := b.dockerRequests()
		if err != nil {
			return err
		}
		busy := false
		for op, v := range after {
			if v > before[op] && !idleOp(op) {
				busy = true
			}
		}
		if !busy || time.Now().After(deadline) {
			return nil
		}
	}
}

// idleOp tells the Docker requests an idle manager makes: the sweep's
// lists, the usage collector's disk measurement and the ping of
// afe_docker_up.
func idleOp(op string) bool {
	return op == "system_df" || op == "ping" || strings.HasSuffix(op, "_list")
}

// counters scrapes the manager's Docker requests by operation
// ("docker:container_create") and its API writes by verb and resource
// ("api:PATCH sandboxes/status"), from afe_docker_requests_total and
// afe_api_writes_total.
func (b *bench) counters() (map[string]float64, error) {
	resp, err := http.Get("http://" + b.metricsAddr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		var key, rest string
		switch {
		case strings.HasPrefix(line, `afe_docker_requests_total{`):
			labels, value, ok := cutMetric(line)
			if !ok {
				continue
			}
			key, rest = "docker:"+labels["operation"], value
		case strings.HasPrefix(line, `afe_api_writes_total{`):
			labels, value, ok := cutMetric(line)
			if !ok {
				continue
			}
			key, rest = "api:"+labels["verb"]+" "+labels["resource"], value
		case strings.HasPrefix(line, `afe_usage_writes_total{`):
			labels, value, ok := cutMetric(line)
			if !ok {
				continue
			}
			key, rest = "usage:"+labels["resource"], value
		case strings.HasPrefix(line, `rest_client_requests_total{`):
			// client-go's own count, by method: the writes of a manager
			// that predates afe_api_writes_total.
			labels, value, ok := cutMetric(line)
			if !ok || labels["method"] == "GET" {
				continue
			}
			key, rest = "rest:"+labels["method"], value
		default:
			continue
		}
		v, err := strconv.ParseFloat(rest, 64)
		if err != nil {
			return nil, err
		}
		out[key] += v
	}
	return out, sc.Err()
}

// cutMetric splits a Prometheus text line into its labels and value.
func cutMetric(line string) (map[string]string, string, bool) {
	open, end := strings.IndexByte(line, '{'), strings.LastIndexByte(line, '}')
	if open < 0 || end < open {
		return nil, "", false
	}
	labels := map[string]string{}
	for _, kv := range strings.Split(line[open+1:end], ",") {
		k, v, ok := strings.Cut(kv, "=")
		if ok {
			labels[k] = strings.Trim(v, `"`)
		}
	}
	return labels, strings.TrimSpace(line[end+1:]), true
}

// procStats is the manager's CPU time so far and its resident memory.
func (b *bench) procStats() (cpu time.Duration, rssBytes int64, err error) {
	pid := b.manager.Process.Pid
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	cpu = ticksToDuration(parseStat(string(stat)).ticks)
	rssBytes, err = procKB(fmt.Sprintf("/proc/%d/status", pid), "VmRSS:")
	return cpu, rssBytes, err
}

// procStat is what the bench reads of a /proc/PID/stat line: the command
// name (cut at 15 characters), the CPU time used, user and system, and the
// start time after boot, both in clock ticks.
type procStat struct {
	comm           string
	ticks, started int64
}

func parseStat(stat string) procStat {
	open, end := strings.IndexByte(stat, '('), strings.LastIndexByte(stat, ')')
	if open < 0 || end < open || end+2 > len(stat) {
		return procStat{}
	}
	// The fields after the command name, which is in parentheses: the
	// state is field 3 of proc(5), so field N is fields[N-3].
	fields := strings.Fields(stat[end+2:])
	if len(fields) < 20 {
		return procStat{}
	}
	utime, _ := strconv.ParseInt(fields[14-3], 10, 64)
	stime, _ := strconv.ParseInt(fields[15-3], 10, 64)
	started, _ := strconv.ParseInt(fields[22-3], 10, 64)
	return procStat{comm: stat[open+1 : end], ticks: utime + stime, started: started}
}

func ticksToDuration(ticks int64) time.Duration {
	const clockTicks = 100 // USER_HZ on Linux
	return time.Duration(ticks) * time.Second / clockTicks
}

// profile saves the manager's pprof profile kind (with query) to the output
// folder, when profiling was asked for.
func (b *bench) profile(kind, query, file string) {
	if !b.cfg.Profile {
		return
	}
	resp, err := http.Get("http://" + b.pprofAddr + "/debug/pprof/" + kind + query)
	if err != nil {
		b.logf("profile %s: %v", kind, err)
		return
	}
	defer func() { _ = resp.Body.Close() }()
	f, err := os.Create(file)
	if err != nil {
		b.logf("profile %s: %v", kind, err)
		return
	}
	defer func() { _ = f.Close() }()
	_, _ = f.ReadFrom(resp.Body)
}

// apiserverProfile saves a CPU profile of the API server over the duration
// (its --profiling, on by default), as the bench's admin reads it.
func (b *bench) apiserverProfile(d time.Duration, file string) {
	data, err := b.apiserver.Get().AbsPath("/debug/pprof/profile").
		Param("seconds", strconv.Itoa(int(d.Seconds()))).Timeout(d + 30*time.Second).DoRaw(context.Background())
	if err == nil {
		err = os.WriteFile(file, data, 0o644)
	}
	if err != nil {
		b.logf("profile of the API server: %v", err)
	}
}

// withCodecs is the config with the codecs a REST client of raw paths
// needs.
func withCodecs(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	return cfg
}

// memAvailable is the host's MemAvailable in bytes.
func memAvailable() (int64, error) { return procKB("/proc/meminfo", "MemAvailable:") }

// procKB reads the "field: N kB" line of a /proc file, in bytes.
func procKB(file, field string) (int64, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no %s in %s", field, file)
}
