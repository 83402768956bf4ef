package loops

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/sandboxspec"
	"afe.dev/sandbox/internal/telemetry"
	"afe.dev/sandbox/test/fakeengine"
)

// An exec the engine has forgotten by the time its end is handled (the fake
// engine inspects none) is still recorded, with the command line its start
// event stated, and once, whatever a restarted stream replays; an exec in a
// container whose labels are not the Sandbox's is not.
func TestEngineExecsRecordWhatTheStartSaid(t *testing.T) {
	ctx := context.Background()
	store, err := telemetry.Open(filepath.Join(t.TempDir(), "t.db"), telemetry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = store.Close() }()
	sbx := &afev1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "box", UID: "uid-box"}}
	labels := sandboxspec.IdentityOf(sbx, "inst").Labels(afev1.RoleSandbox)
	execs := newEngineExecs(othersExecs{fakeengine.New()}, store, "inst", func(docker.Event) *afev1.Sandbox { return sbx })
	at := time.Now()
	event := func(action docker.EventAction, id, detail string, labels map[string]string, extra ...string) docker.Event {
		l := map[string]string{"execID": id}
		for k, v := range labels {
			l[k] = v
		}
		for i := 0; i+1 < len(extra); i += 2 {
			l[extra[i]] = extra[i+1]
		}
		at = at.Add(time.Millisecond)
		return docker.Event{Action: action, Detail: detail, Labels: l, Time: at}
	}
	// saw() hands ends to the worker; record() is that worker's step.
	work := func() {
		t.Helper()
		for len(execs.jobs) > 0 {
			if err := execs.record(ctx, <-execs.jobs); err != nil {
				t.Fatal(err)
			}
		}
	}
	start1, end1 := event(docker.ActionExecStart, "e1", "sh -c exit 4", labels), event(docker.ActionExecDie, "e1", "", labels, "exitCode", "4")
	execs.saw(start1)
	execs.saw(end1)
	work()
	// A stream started again since an earlier event replays these two.
	execs.saw(start1)
	execs.saw(end1)
	if len(execs.jobs) != 0 {
		t.Fatal("a replayed exec's end is handed on again")
	}
	spoiled := map[string]string{}
	for k, v := range labels {
		spoiled[k] = v
	}
	spoiled[afev1.LabelSandboxUID] = "uid-other"
	execs.saw(event(docker.ActionExecStart, "e2", "id", spoiled))
	execs.saw(event(docker.ActionExecDie, "e2", "", spoiled, "exitCode", "0"))
	work()
	if err := store.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	recs, err := store.List(ctx, telemetry.Filter{Namespace: "ns", Sandbox: "box"})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 {
		t.Fatalf("%d records, want the one exec in the sandbox's own container: %+v", len(recs), recs)
	}
	got := recs[0]
	want := telemetry.Record{Namespace: "ns", Sandbox: "box", SandboxUID: "uid-box", Ticket: "box", Seq: 1,
		Command: []string{"sh -c exit 4"}, ExitCode: 4, Source: telemetry.SourceEngine, StartedBy: got.StartedBy}
	got.Started, got.Ended = time.Time{}, time.Time{}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("the record (-want +got):\n%s", diff)
	}
}

// othersExecs is an engine on which every exec was made by someone else.
type othersExecs struct{ *fakeengine.Engine }

func (othersExecs) OwnExec(string) bool { return false }
