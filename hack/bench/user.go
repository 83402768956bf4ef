package main

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/sandboxspec"
)

// The resources of the user's tickets, and the plain script's flags for
// them.
const (
	userCPU    = "500m"
	userMemory = "128Mi"
	userPids   = 64
)

// plainRunArgs is the docker run a user would write instead of a Ticket:
// the same hardening and limits, a volume for /workspace, no network.
func plainRunArgs(name, image, label string) []string {
	return []string{"run", "-d", "--name", name, "--label", label,
		"--network", "none", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
		"--user", "1000:1000", "--memory", "128m", "--memory-swap", "128m", "--cpus", "0.5",
		"--pids-limit", fmt.Sprint(userPids), "--init", "-v", name + "-ws:" + sandboxspec.WorkspacePath,
		image, "sleep", "99999"}
}

// userTickets: N Tickets as a user makes them (kubectl apply of a list,
// then kubectl wait for Ready), against the plain docker run script at
// -parallel; then set Done until no labelled object is left, against
// docker rm -f and docker volume rm of the same. Once for each of
// -user-tickets.
func (b *bench) userTickets(ctx context.Context) ([]row, error) {
	var rows []row
	for _, n := range b.cfg.UserTickets {
		r, err := b.userTicketsOf(ctx, n)
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

// userTicketsOf is userTickets for one N.
// Long on purpose: a scenario reads top to bottom as the sequence it
// times, each step beside its CLI twin; split, the timing would be read
// across functions.
func (b *bench) userTicketsOf(ctx context.Context, n int) ([]row, error) {
	b.logf("%d Tickets as a user makes them", n)
	group := fmt.Sprintf("user-%d", n)
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", group, i)
	}
	counts0, err := b.counters()
	if err != nil {
		return nil, err
	}
	stopProfile := b.cpuProfile(fmt.Sprintf("cpu-%s.pprof", group))
	created, err := b.applyTickets(ctx, group, names)
	if err != nil {
		stopProfile()
		return nil, err
	}
	time.Sleep(2 * time.Second) // the last status writes
	counts1, err := b.counters()
	if err != nil {
		stopProfile()
		return nil, err
	}

	b.logf("%d Tickets set Done", n)
	gone, err := b.watchGone(ctx, map[string]string{afev1.LabelController: b.instance, afev1.LabelNamespace: b.ns})
	if err != nil {
		stopProfile()
		return nil, err
	}
	start := time.Now()
	if err := inParallel(n, 8, func(i int) error {
		patch := []byte(`{"spec":{"state":"Done"}}`)
		return b.c.Patch(ctx, &afev1.Ticket{ObjectMeta: metav1.ObjectMeta{Name: names[i], Namespace: b.ns}},
			client.RawPatch(types.MergePatchType, patch))
	}); err != nil {
		stopProfile()
		return nil, err
	}
	last, err := gone.wait(5 * time.Minute)
	cleaned := last.Sub(start)
	stopProfile()
	if err == nil {
		err = b.waitNoObjects(ctx, time.Minute) // and nothing else was left
	}
	if err != nil {
		return nil, err
	}
	time.Sleep(2 * time.Second)
	counts2, err := b.counters()
	if err != nil {
		return nil, err
	}

	plain := make([]string, n)
	for i := range plain {
		plain[i] = fmt.Sprintf("afebench-%s-%s-%d", b.cliInstance, group, i)
	}
	defer b.removePlain(plain)
	label := afev1.LabelController + "=" + b.cliInstance
	b.logf("the plain script: %d docker run -d", n)
	plainCreate, err := timed(func() error {
		return b.xargs(ctx, plain, func(name string) []string { return plainRunArgs(name, b.cfg.Image, label) })
	})
	if err != nil {
		return nil, err
	}
	if exec.Command("docker", "exec", plain[0], "touch", "/workspace/.w").Run() == nil {
		return nil, fmt.Errorf("the plain script's /workspace is writable by its user: the writable row compares nothing")
	}
	b.logf("the plain script: %d docker rm -f and docker volume rm", n)
	plainRemove, err := timed(func() error {
		return b.xargsShell(ctx, plain, `docker rm -f "$1" >/dev/null && docker volume rm "$1-ws" >/dev/null`)
	})
	if err != nil {
		return nil, err
	}
	// The plain script leaves /workspace owned by root, so its user cannot
	// write there; the script that makes it writable, as the controller
	// does, copies the directory in with its owner before the start.
	writable := make([]string, n)
	for i := range writable {
		writable[i] = fmt.Sprintf("afebench-%s-%s-w-%d", b.cliInstance, group, i)
	}
	defer b.removePlain(writable)
	dir, err := workspaceTar(b.cfg.Out)
	if err != nil {
		return nil, err
	}
	b.logf("the plain script with a writable /workspace: %d docker create, docker cp and docker start", n)
	writableCreate, err := timed(func() error {
		create := strings.Join(plainRunArgs(`"$1"`, b.cfg.Image, label)[2:], " ")
		return b.xargsShell(ctx, writable, `docker create `+create+` >/dev/null && docker cp - "$1":/ <'`+dir+
			`' && docker start "$1" >/dev/null`)
	})
	if err != nil {
		return nil, err
	}
	if out, err := exec.Command("docker", "exec", writable[0], "touch", "/workspace/.w").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("the writable script's /workspace is not writable: %w: %s", err, out)
	}
	b.logf("the plain script is done")
	parallel := fmt.Sprintf("%d-parallel", b.cfg.Parallel)
	how := "`kubectl apply` then `kubectl wait`"
	if !b.cfg.Kubectl {
		how = "created, until a watch sees all Ready"
	}
	return []row{
		{
			Scenario:   fmt.Sprintf("%d Tickets (%s CPU, %s, %d pids), %s", n, userCPU, userMemory, userPids, how),
			Controller: seconds(created),
			Baseline:   fmt.Sprintf("plain `docker run -d ... -v` %s %s", parallel, seconds(plainCreate)),
			Ratio:      ratio(created, plainCreate),
		},
		{
			Scenario: fmt.Sprintf("The same %d, against the plain script that leaves /workspace writable by its user (`docker create`, "+
				"`docker cp` of the directory owned 1000:1000, `docker start`)", n),
			Controller: seconds(created),
			Baseline:   fmt.Sprintf("%s %s", parallel, seconds(writableCreate)),
			Ratio:      ratio(created, writableCreate),
		},
		{
			Scenario:   fmt.Sprintf("The %d Tickets set Done, until no labelled object is left", n),
			Controller: seconds(cleaned),
			Baseline:   fmt.Sprintf("`docker rm -f` + `docker volume rm` %s %s", parallel, seconds(plainRemove)),
			Ratio:      ratio(cleaned, plainRemove),
		},
		{
			Scenario: fmt.Sprintf("Requests per Ticket of the %d (creation to Ready; Done to cleaned)", n),
			Controller: fmt.Sprintf("%s; %s",
				perTicket(counts0, counts1, n), perTicket(counts1, counts2, n)),
			Baseline: "-", Ratio: "-",
		},
	}, nil
}

// applyTickets makes the Tickets and returns how long until all are Ready:
// with kubectl (a list applied, then kubectl wait) as a user would, or
// with the bench's client and a watch.
// Long on purpose: a scenario reads top to bottom as the sequence it
// times, each step beside its CLI twin; split, the timing would be read
// across functions.
func (b *bench) applyTickets(ctx context.Context, group string, names []string) (time.Duration, error) {
	tickets := make([]afev1.Ticket, len(names))
	for i, name := range names {
		tickets[i] = afev1.Ticket{
			TypeMeta:   metav1.TypeMeta{APIVersion: afev1.GroupVersion.String(), Kind: "Ticket"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: b.ns, Labels: map[string]string{"bench": group}},
			Spec:       afev1.TicketSpec{Sandbox: b.userTemplate()},
		}
	}
	if !b.cfg.Kubectl {
		w, err := b.watch(ctx, &afev1.TicketList{})
		if err != nil {
			return 0, err
		}
		start := time.Now()
		if err := inParallel(len(tickets), 8, func(i int) error { return b.c.Create(ctx, &tickets[i]) }); err != nil {
			w.w.Stop()
			return 0, err
		}
		seen, err := w.until(ctx, 10*time.Minute, names, ticketReady)
		if err != nil {
			return 0, err
		}
		return latest(seen).Sub(start), nil
	}
	var list bytes.Buffer
	list.WriteString("apiVersion: v1\nkind: List\nitems:\n")
	for i := range tickets {
		y, err := yaml.Marshal(&tickets[i])
		if err != nil {
			return 0, err
		}
		for j, line := range strings.Split(strings.TrimRight(string(y), "\n"), "\n") {
			prefix := "  "
			if j == 0 {
				prefix = "- "
			}
			list.WriteString(prefix + line + "\n")
		}
	}
	file := filepath.Join(b.cfg.Out, group+".yaml")
	if err := os.WriteFile(file, list.Bytes(), 0o644); err != nil {
		return 0, err
	}
	// Unmeasured: kubectl's discovery and OpenAPI documents, which a
	// user's kubectl has cached (the bench's API server is on a new port
	// every run): a dry run of the same apply, and a get.
	if err := b.kubectl(ctx, "apply", "--dry-run=server", "-f", file); err != nil {
		return 0, err
	}
	if err := b.kubectl(ctx, "get", "tickets", "-n", b.ns); err != nil {
		return 0, err
	}
	return timed(func() error {
		t0 := time.Now()
		if err := b.kubectl(ctx, "apply", "-f", file); err != nil {
			return err
		}
		b.logf("kubectl apply of %d Tickets took %s", len(names), time.Since(t0))
		return b.kubectl(ctx, "wait", "--for=condition=Ready", "tickets", "-n", b.ns, "-l", "bench="+group, "--timeout=10m")
	})
}

func (b *bench) kubectl(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, "kubectl", append([]string{"--kubeconfig", b.kubeconfig}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("kubectl %s: %w: %s", args[0], err, strings.TrimSpace(string(out)))
	}
	return nil
}

// xargs runs one docker command per name, -parallel at a time, with
// xargs as the user's script would.
func (b *bench) xargs(ctx context.Context, names []string, args func(name string) []string) error {
	var script strings.Builder
	for _, name := range names {
		script.WriteString(strings.Join(args(name), " ") + "\n")
	}
	cmd := exec.CommandContext(ctx, "xargs", "-P", fmt.Sprint(b.cfg.Parallel), "-L", "1", "docker")
	cmd.Stdin = strings.NewReader(script.String()) // a line per command, docker's arguments

	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("xargs docker: %w: %s", err, lastLines(out))
	}
	return nil
}

// xargsShell runs the shell script once per name ($1), -parallel at a time.
func (b *bench) xargsShell(ctx context.Context, names []string, script string) error {
	cmd := exec.CommandContext(ctx, "xargs", "-P", fmt.Sprint(b.cfg.Parallel), "-n", "1", "sh", "-c", script, "sh")
	cmd.Stdin = strings.NewReader(strings.Join(names, "\n") + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("xargs sh: %w: %s", err, lastLines(out))
	}
	return nil
}

// workspaceTar writes, once, a tar of the directory workspace owned by
// 1000:1000 into dir, and returns its path.
func workspaceTar(dir string) (string, error) {
	file := filepath.Join(dir, "workspace.tar")
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "workspace/", Mode: 0o755,
		Uid: 1000, Gid: 1000, ModTime: time.Now()}); err != nil {
		return "", err
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	return file, os.WriteFile(file, buf.Bytes(), 0o644)
}

// removePlain removes what the plain script made, whatever happened.
func (b *bench) removePlain(names []string) {
	for _, name := range names {
		_ = exec.Command("docker", "rm", "-f", name).Run()
		_ = exec.Command("docker", "volume", "rm", "-f", name+"-ws").Run()
	}
}

func lastLines(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return strings.Join(lines[max(0, len(lines)-3):], "; ")
}

// perTicket renders the difference of two counter scrapes, divided by n.
// The usage collector's periodic reports (afe_usage_writes_total), which
// fall in the window or not as its period turns, are said apart and not
// counted among the writes the tickets made.
func perTicket(before, after map[string]float64, n int) string {
	var docker, api, rest []string
	var dockerTotal, apiTotal, restTotal, usageTotal float64
	keys := make([]string, 0, len(after))
	for k := range after {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	delta := func(k string) float64 { return (after[k] - before[k]) / float64(n) }
	for _, k := range keys {
		d := delta(k)
		kind, name, _ := strings.Cut(k, ":")
		if kind == "api" && strings.HasPrefix(name, "PATCH ") {
			d -= delta("usage:" + strings.TrimPrefix(name, "PATCH "))
		}
		if d < 0.05 {
			continue
		}
		item := fmt.Sprintf("%s %.1f", name, d)
		switch kind {
		case "docker":
			docker, dockerTotal = append(docker, item), dockerTotal+d
		case "api":
			api, apiTotal = append(api, item), apiTotal+d
		case "usage":
			usageTotal += d
		default:
			rest, restTotal = append(rest, item), restTotal+d
		}
	}
	if len(api) == 0 {
		api, apiTotal = rest, restTotal // an older manager: by method only
	}
	usage := ""
	if usageTotal > 0 {
		usage = fmt.Sprintf(" and %.1f usage reports", usageTotal)
	}
	return fmt.Sprintf("Docker %.1f (%s), API writes %.1f (%s)%s", dockerTotal, strings.Join(docker, ", "),
		apiTotal, strings.Join(api, ", "), usage)
}
