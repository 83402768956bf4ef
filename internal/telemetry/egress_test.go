package telemetry

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	accessv1 "afe.dev/sandbox/api/access/v1alpha1"
)

func egress(sandbox, uid, host, decision string, at time.Time, n int) Egress {
	return Egress{
		Record: EgressRecord{Namespace: "ns", Sandbox: sandbox, SandboxUID: uid, Ticket: "tk-ns", Time: at,
			Duration: metav1.Duration{Duration: 12 * time.Millisecond}, Method: "CONNECT", Host: host, Port: 443,
			Decision: decision, Status: "TCP_TUNNEL/200", BytesUp: 10, BytesDown: 20, Running: []string{"Run/r"}, Proxy: "proxy-" + uid},
		Cursor: Cursor{At: at, N: n},
	}
}

// Commands and egress records of a sandbox share one sequence, in the
// order they were added; the denied filter and the ticket select.
func TestEgressSharesTheSequence(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "t.db"), Options{})
	now := time.Now().UTC()
	s.Add(record("sbx", "uid", 0))
	if err := s.AddEgress(ctx, egress("sbx", "uid", "allowed.test", accessv1.EgressAllowed, now, 0)); err != nil {
		t.Fatal(err)
	}
	if err := s.AddEgress(ctx, egress("other", "uid-2", "x.test", accessv1.EgressDenied, now, 0)); err != nil {
		t.Fatal(err)
	}
	if err := s.AddEgress(ctx, egress("sbx", "uid", "denied.test", accessv1.EgressDenied, now, 1)); err != nil {
		t.Fatal(err)
	}
	s.Add(record("sbx", "uid", 1))
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	cmds, err := s.List(ctx, Filter{Namespace: "ns", Sandbox: "sbx"})
	if err != nil || len(cmds) != 2 || cmds[0].Seq != 1 || cmds[1].Seq != 4 {
		t.Fatalf("commands %+v, %v", cmds, err)
	}
	eg, err := s.ListEgress(ctx, EgressFilter{Filter: Filter{Namespace: "ns", Sandbox: "sbx"}})
	if err != nil || len(eg) != 2 || eg[0].Seq != 2 || eg[1].Seq != 3 || eg[0].Host != "allowed.test" {
		t.Fatalf("egress %+v, %v", eg, err)
	}
	want := egress("sbx", "uid", "allowed.test", accessv1.EgressAllowed, now, 0).Record
	want.Seq = 2
	if got := eg[0]; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("read back %+v, want %+v", got, want)
	}
	denied, _ := s.ListEgress(ctx, EgressFilter{Filter: Filter{Namespace: "ns", Ticket: "tk-ns"}, DeniedOnly: true})
	if len(denied) != 2 || denied[0].Host != "x.test" || denied[1].Host != "denied.test" {
		t.Fatalf("denied of the ticket: %+v", denied)
	}
	if other, _ := s.ListEgress(ctx, EgressFilter{Filter: Filter{Namespace: "other", Sandbox: "sbx"}}); len(other) != 0 {
		t.Fatalf("another namespace sees %d egress records", len(other))
	}
	totals, err := s.EgressTotals(ctx)
	wantTotals := map[string]EgressTotal{"uid": {Bytes: 60, Denials: 1}, "uid-2": {Bytes: 30, Denials: 1}}
	if err != nil || fmt.Sprint(totals) != fmt.Sprint(wantTotals) {
		t.Fatalf("totals %v (%v), want %v", totals, err, wantTotals)
	}
	c, ok, err := s.EgressCursor(ctx, "proxy-uid")
	if err != nil || !ok || !c.At.Equal(now) || c.N != 1 {
		t.Fatalf("cursor %+v %v %v", c, ok, err)
	}
	if _, ok, _ := s.EgressCursor(ctx, "proxy-none"); ok {
		t.Fatal("a cursor for a proxy that wrote nothing")
	}
	if !c.After(now.Add(time.Nanosecond), 0) || !c.After(now, 2) || c.After(now, 1) || c.After(now.Add(-time.Second), 5) {
		t.Fatal("Cursor.After")
	}
}

// Egress records go with the commands' retention and size bound.
func TestPruneTakesEgressRecords(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "t.db"), Options{Retention: time.Hour})
	now := time.Now().UTC()
	if err := s.AddEgress(ctx, egress("sbx", "uid", "old.test", accessv1.EgressAllowed, now.Add(-2*time.Hour), 0)); err != nil {
		t.Fatal(err)
	}
	if err := s.AddEgress(ctx, egress("sbx", "uid", "new.test", accessv1.EgressAllowed, now, 0)); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if res, err := s.Prune(ctx, now, nil); err != nil || res.Removed() != 1 {
		t.Fatalf("pruned %d, %v", res.Removed(), err)
	}
	eg, _ := s.ListEgress(ctx, EgressFilter{Filter: Filter{Namespace: "ns", Sandbox: "sbx"}})
	if len(eg) != 1 || eg[0].Host != "new.test" {
		t.Fatalf("left %+v", eg)
	}

	bounded := open(t, filepath.Join(t.TempDir(), "b.db"), Options{MaxBytes: 256 << 10})
	for i := range 5000 {
		if err := bounded.AddEgress(ctx, egress("sbx", "uid", fmt.Sprintf("host-%d.test", i), accessv1.EgressDenied, now, i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := bounded.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if res, err := bounded.Prune(ctx, now, nil); err != nil || res.Removed() == 0 {
		t.Fatalf("pruned %d, %v", res.Removed(), err)
	}
	if size, _ := bounded.Size(ctx); size > 256<<10 {
		t.Fatalf("size %d after the prune, bound %d", size, 256<<10)
	}
	left, _ := bounded.ListEgress(ctx, EgressFilter{Filter: Filter{Namespace: "ns", Sandbox: "sbx", Limit: 10000}})
	if len(left) == 0 || left[len(left)-1].Host != "host-4999.test" {
		t.Fatalf("the newest egress records must stay: %d left", len(left))
	}
}

// AddEgress waits for room in a full queue rather than dropping, until its
// context ends.
func TestAddEgressWaitsForRoom(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "t.db"), Options{Queue: 4, Batch: 2})
	now := time.Now().UTC()
	for i := range 500 {
		if err := s.AddEgress(ctx, egress("sbx", "uid", fmt.Sprintf("h%d.test", i), accessv1.EgressAllowed, now, i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if s.Dropped() != 0 || s.Written() != 500 {
		t.Fatalf("dropped %d, written %d", s.Dropped(), s.Written())
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	for i := range 1000 {
		if err := s.AddEgress(done, egress("sbx", "uid", "late.test", accessv1.EgressAllowed, now, 500+i)); err != nil {
			return // the queue was full: the ended context said so
		}
	}
	t.Fatal("1000 records queued at once into a queue of 4 with an ended context")
}
