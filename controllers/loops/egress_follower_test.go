package loops

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/naming"
	"afe.dev/sandbox/internal/sandboxspec"
	"afe.dev/sandbox/internal/telemetry"
	"afe.dev/sandbox/test/dockertest"
)

// decisionLine is a line as the proxy's squid writes it.
func decisionLine(client, why, host string) string {
	status := "TCP_TUNNEL/200"
	if why != "-" {
		status = "TCP_DENIED/403"
	}
	return fmt.Sprintf("afe-egress v1 time=%d.000 ms=3 client=%s status=%s why=%s up=10 down=20 method=CONNECT url=%s:443",
		time.Now().Unix(), client, status, why, host)
}

// runFollower runs a follower of the instance until the returned stop is
// called.
func runFollower(engine EgressEngine, store *telemetry.Store, instance string, owner func(docker.Container) (sandboxspec.Identity, bool)) (*EgressFollower, func()) {
	f := &EgressFollower{Engine: engine, Store: store, Instance: instance, Owner: owner, Period: 200 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = f.Start(ctx); close(done) }()
	return f, func() { cancel(); <-done }
}

// The follower records the decisions of a verified proxy's stdout (a
// stand-in for squid on the real engine), under the container's identity,
// leaving out squid's other lines, its probe's and those that do not read;
// a sandbox container that prints a decision line of its own is not
// followed; a follower started again (the manager restarted) goes on from
// the last record, neither losing the lines written meanwhile nor writing
// one twice; a proxy removed stops its follow.
func TestEgressFollowerRecordsAVerifiedProxysLog(t *testing.T) {
	engine, skip, err := dockertest.Require()
	if err != nil {
		t.Fatal(err)
	}
	if skip != "" {
		t.Skip(skip)
	}
	ctx := context.Background()
	instance := fmt.Sprintf("egress-test-%d", time.Now().UnixNano())
	t.Cleanup(func() { dockertest.RemoveAll(afev1.LabelController + "=" + instance) })
	store, err := telemetry.Open(filepath.Join(t.TempDir(), "t.db"), telemetry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = store.Close() }()
	sbx := &afev1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("box-%d", time.Now().UnixNano()), UID: "uid-box"}}
	id := sandboxspec.IdentityOf(sbx, instance)
	owner := func(c docker.Container) (sandboxspec.Identity, bool) {
		return egressOwner(c, instance, func(ns, name string) *afev1.Sandbox {
			if ns == sbx.Namespace && name == sbx.Name {
				return sbx
			}
			return nil
		}, nil)
	}
	script := "echo '2026/12/05 06:00:00| Accepting HTTP Socket connections'; " +
		"echo '" + decisionLine("172.19.0.4", "-", "allowed.test") + "'; " +
		"echo '" + decisionLine("127.0.0.1", "-", "probe.test") + "'; " +
		"echo 'afe-egress v1 time=x'; " +
		"echo '" + decisionLine("172.19.0.4", "host", "denied.test") + "'; exec sleep 600"
	run := func(name, role string) {
		t.Helper()
		if _, err := engine.RunContainer(ctx, docker.ContainerSpec{Name: name, Image: dockertest.TestImage, Labels: id.Labels(role),
			Network: "none", User: "1000:1000", Init: true, Command: []string{"sh", "-c", script}}); err != nil {
			t.Fatal(err)
		}
	}
	run(naming.Proxy(id.Key), afev1.RoleProxy)
	// The workload's own container prints the same lines: not a proxy.
	run(naming.Container(id.Key), afev1.RoleSandbox)

	hosts := func() []string {
		recs, err := store.ListEgress(ctx, telemetry.EgressFilter{Filter: telemetry.Filter{Namespace: "ns", Sandbox: sbx.Name}})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range recs {
			if r.SandboxUID != "uid-box" || r.Ticket != sbx.Name {
				t.Fatalf("record under %s/%s", r.SandboxUID, r.Ticket)
			}
			out = append(out, fmt.Sprintf("%d %s %s %s", r.Seq, r.Host, r.Decision, r.Reason))
		}
		return out
	}
	waitFor := func(want ...string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for got := hosts(); !slices.Equal(got, want); got = hosts() {
			if time.Now().After(deadline) {
				t.Fatalf("records %q, want %q", got, want)
			}
			_ = store.Flush(ctx)
			time.Sleep(100 * time.Millisecond)
		}
	}
	f, stop := runFollower(engine, store, instance, owner)
	waitFor("1 allowed.test Allowed ", "2 denied.test Denied host")
	if n := f.Following(); n != 1 {
		t.Fatalf("following %d containers, want the proxy only", n)
	}
	stop()

	// While no manager follows, the proxy decides twice more.
	proxy := naming.Proxy(id.Key)
	for _, h := range []string{"later.test", "again.test"} {
		if out, err := dockertest.Exec(proxy, "sh", "-c", "echo '"+decisionLine("172.19.0.4", "-", h)+"' > /proc/1/fd/1"); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	f, stop = runFollower(engine, store, instance, owner)
	defer stop()
	waitFor("1 allowed.test Allowed ", "2 denied.test Denied host", "3 later.test Allowed ", "4 again.test Allowed ")
	time.Sleep(time.Second) // nothing more comes
	waitFor("1 allowed.test Allowed ", "2 denied.test Denied host", "3 later.test Allowed ", "4 again.test Allowed ")

	if err := dockertest.RemoveContainer(proxy); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for f.Following() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the follow of a removed proxy did not stop")
		}
		time.Sleep(100 * time.Millisecond)
	}

	// The proxy recreated (a new container of the same name) is a new
	// follow, from its own log's start.
	script = "echo '" + decisionLine("172.19.0.4", "host", "recreated.test") + "'; exec sleep 600"
	run(proxy, afev1.RoleProxy)
	waitFor("1 allowed.test Allowed ", "2 denied.test Denied host", "3 later.test Allowed ", "4 again.test Allowed ", "5 recreated.test Denied host")
}
