package run

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/test/fakeengine"
)

// The sandbox's declared env is the environment of an attempt's steps
// (with a builtin's own variables winning), and of none of the
// controller's own execs: the kill of what an attempt left, the check of a
// merge's report.
func TestTenantEnvReachesTheStepsOnly(t *testing.T) {
	ctx := context.Background()
	engine := fakeengine.New("afe/busybox:dev")
	var mu sync.Mutex
	var execs []docker.ExecSpec
	engine.SetExec(func(_ context.Context, _ docker.Container, spec docker.ExecSpec) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		execs = append(execs, spec)
		return 0, nil
	})
	ct, err := engine.RunContainer(ctx, docker.ContainerSpec{Name: "afe-team.box", Image: "afe/busybox:dev", User: "1000:1000"})
	if err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{Engine: engine}
	a := &attempt{number: 1, gid: 70001, sandboxGID: 1000, container: ct.Name, containerID: ct.ID,
		env: []string{"API_TOKEN=s3cr3t", "AFE_OWN=declared"}}
	var timedOut atomic.Bool
	step := func(a *attempt, own ...string) {
		o := &outcome{started: time.Now()}
		if _, ok := r.step(ctx, a, 1000, &timedOut, o, docker.ExecSpec{Cmd: []string{"true"}, Env: own}); !ok {
			t.Fatalf("the step had no outcome: %+v", o)
		}
	}

	step(a)
	step(a, "AFE_OWN=builtin")
	r.kill(ctx, a, 1000)
	step(checkAttempt(&afev1.Run{}, a), "AFE_OWN=builtin")

	want := [][]string{
		{"API_TOKEN=s3cr3t", "AFE_OWN=declared"},
		{"API_TOKEN=s3cr3t", "AFE_OWN=builtin"},
		nil,                 // the kill
		{"AFE_OWN=builtin"}, // the check: its own variables only
	}
	var got [][]string
	for _, e := range execs {
		got = append(got, e.Env)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatal(d)
	}
}
