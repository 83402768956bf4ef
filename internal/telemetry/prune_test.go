package telemetry

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	accessv1 "afe.dev/sandbox/api/access/v1alpha1"
)

func TestWaterLevel(t *testing.T) {
	tests := map[string]struct {
		counts []int64
		keep   int64
		want   int64
	}{
		"everything fits":              {counts: []int64{3, 5}, keep: 10, want: 5},
		"the largest alone is cut":     {counts: []int64{1, 2, 100}, keep: 53, want: 50},
		"two large ones share the cut": {counts: []int64{1, 60, 100}, keep: 81, want: 40},
		"all cut alike":                {counts: []int64{10, 10, 10}, keep: 15, want: 5},
		"nothing kept":                 {counts: []int64{4, 9}, keep: 0, want: 0},
		"no buckets":                   {keep: 5, want: 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := waterLevel(tc.counts, tc.keep)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatal(diff)
			}
			var held int64
			for _, c := range tc.counts {
				held += min(c, got)
			}
			if held > tc.keep && len(tc.counts) > 0 {
				t.Fatalf("level %d holds %d, more than %d", got, held, tc.keep)
			}
		})
	}
}

// tenant adds a command and then egress records of a sandbox of its own
// namespace.
func tenant(t *testing.T, s *Store, ns string, egressN int) {
	t.Helper()
	ctx := context.Background()
	r := record("box-"+ns, "uid-"+ns, 0)
	r.Namespace, r.Ticket = ns, "tk-"+ns
	s.Add(r)
	for i := range egressN {
		e := egress("box-"+ns, "uid-"+ns, fmt.Sprintf("host-%d.test", i), accessv1.EgressDenied, time.Now(), i)
		e.Record.Namespace, e.Record.Ticket = ns, "tk-"+ns
		if err := s.AddEgress(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// wantWhole fails unless the namespace's sandbox holds its command and n
// egress records, seq 1 to n+1, and no note of a prune.
func wantWhole(t *testing.T, s *Store, ns string, n int) {
	t.Helper()
	ctx := context.Background()
	f := Filter{Namespace: ns, Sandbox: "box-" + ns, Limit: 100000}
	cmds, _ := s.List(ctx, f)
	eg, _ := s.ListEgress(ctx, EgressFilter{Filter: f})
	if len(cmds) != 1 || cmds[0].Seq != 1 || len(eg) != n || n > 0 && (eg[0].Seq != 2 || eg[n-1].Seq != int64(n+1)) {
		t.Fatalf("namespace %s: %d commands and %d egress records left, want 1 and %d", ns, len(cmds), len(eg), n)
	}
	for _, kind := range []string{KindCommands, KindEgress} {
		if notes, err := s.PrunedOf(ctx, f, kind); err != nil || len(notes) != 0 {
			t.Fatalf("namespace %s: notes of %s pruned %+v, %v", ns, kind, notes, err)
		}
	}
}

// A flood of egress records in one namespace, under a small MaxBytes,
// costs that namespace's egress records only: another namespace's command
// and egress records, written before the flood (the oldest of the store),
// stay whole, and so does the flooding namespace's command; what went is
// said per namespace, kind and bound, and noted per sandbox for the audit,
// through the newest sequence number that went. With NamespaceMaxRecords
// the flooding namespace keeps that many, the others all theirs.
func TestAFloodCostsTheFloodingNamespaceOnly(t *testing.T) {
	ctx := context.Background()
	const bound = 256 << 10
	s := open(t, filepath.Join(t.TempDir(), "t.db"), Options{MaxBytes: bound})
	tenant(t, s, "quiet", 3)
	tenant(t, s, "loud", 0)
	var removed int64
	for range 5 { // the pruner runs during the flood
		e := 1000
		for i := range e {
			flood := egress("box-loud", "uid-loud", fmt.Sprintf("flood-%d.test", i), accessv1.EgressDenied, time.Now(), i)
			flood.Record.Namespace, flood.Record.Ticket = "loud", "tk-loud"
			if err := s.AddEgress(ctx, flood); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		res, err := s.Prune(ctx, time.Now(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range res.Bounded {
			if p.Namespace != "loud" || p.Kind != KindEgress || p.Bound != BoundStore {
				t.Fatalf("pruned %+v", p)
			}
			removed += p.Records
		}
	}
	if size, _ := s.Size(ctx); removed == 0 || size > bound {
		t.Fatalf("removed %d, size %d, bound %d", removed, size, bound)
	}
	wantWhole(t, s, "quiet", 3)
	f := Filter{Namespace: "loud", Sandbox: "box-loud", Limit: 100000}
	if cmds, _ := s.List(ctx, f); len(cmds) != 1 {
		t.Fatalf("the flooding namespace's command went: %d left", len(cmds))
	}
	left, _ := s.ListEgress(ctx, EgressFilter{Filter: f})
	notes, err := s.PrunedOf(ctx, f, KindEgress)
	if err != nil || len(notes) != 1 || notes[0].Records != removed || notes[0].SandboxUID != "uid-loud" ||
		len(left) == 0 || notes[0].ThroughSeq+1 != left[0].Seq || int64(len(left))+removed != 5000 {
		t.Fatalf("notes %+v (%v), %d left from #%d, %d removed", notes, err, len(left), left[0].Seq, removed)
	}
	if byTicket, _ := s.PrunedOf(ctx, Filter{Namespace: "loud", Ticket: "tk-loud"}, KindEgress); !cmp.Equal(byTicket, notes) {
		t.Fatalf("by ticket: %+v", byTicket)
	}

	s.opts.MaxBytes, s.opts.NamespaceMaxRecords = 0, 100
	res, err := s.Prune(ctx, time.Now(), nil)
	want := []Pruned{{Namespace: "loud", Kind: KindEgress, Bound: BoundNamespace, Records: int64(len(left)) - 100}}
	if diff := cmp.Diff(want, res.Bounded); err != nil || diff != "" {
		t.Fatalf("%v %s", err, diff)
	}
	wantWhole(t, s, "quiet", 3)
}

// Each statement of a cut finds its rows through the namespace index,
// never by reading the whole table.
func TestCutUsesTheNamespaceIndex(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "t.db"), Options{})
	for _, table := range tables {
		c := cutSQL(table)
		for _, q := range []struct {
			sql  string
			args []any
		}{{c.byCount, []any{"ns", 9}}, {c.byBytes, []any{"ns", 9}}, {c.newest, []any{"ns"}}, {c.note, []any{KindEgress, 1, "ns", 9}}, {c.del, []any{"ns", 9}}} {
			rows, err := s.db.Query(`EXPLAIN QUERY PLAN `+q.sql, q.args...)
			if err != nil {
				t.Fatal(err)
			}
			var plan []string
			for rows.Next() {
				var id, parent, unused int
				var detail string
				if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
					t.Fatal(err)
				}
				plan = append(plan, detail)
			}
			_ = rows.Close()
			joined := strings.Join(plan, "; ")
			if !strings.Contains(joined, "INDEX "+table+"_namespace (namespace=?") || strings.Contains(joined, "SCAN "+table) {
				t.Fatalf("%s: %s", q.sql, joined)
			}
		}
	}
}

// Buckets weigh their bytes, not their records: a namespace of few long
// commands that holds most of the store loses them, and another's many
// small egress records stay whole.
func TestLongRecordsWeighTheirSize(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "t.db"), Options{})
	tenant(t, s, "quiet", 300)
	for i := range 60 {
		r := record("box-long", "uid-long", i)
		r.Namespace, r.Command = "long", []string{"sh", "-c", strings.Repeat("x", 16<<10)}
		s.Add(r)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	size, _ := s.Size(ctx)
	s.opts.MaxBytes = size * 3 / 4
	res, err := s.Prune(ctx, time.Now(), nil)
	if err != nil || len(res.Bounded) != 1 || res.Bounded[0].Namespace != "long" || res.Bounded[0].Kind != KindCommands {
		t.Fatalf("pruned %+v, %v", res.Bounded, err)
	}
	wantWhole(t, s, "quiet", 300)
}
