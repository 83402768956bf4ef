package telemetry

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func open(t *testing.T, path string, opts Options) *Store {
	t.Helper()
	s, err := Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func record(sandbox, uid string, i int) Record {
	const ns = "ns"
	now := time.Now()
	return Record{Namespace: ns, Sandbox: sandbox, SandboxUID: uid, Ticket: "tk-" + ns, Started: now.Add(-time.Second), Ended: now,
		Command: []string{"sh", "-c", fmt.Sprintf("echo %d", i)}, User: "1000:1000", ExitCode: i % 3, Source: SourceRun, StartedBy: "Run r"}
}

// wantSequence fails unless recs are seq 1..n of uid, in order.
func wantSequence(t *testing.T, recs []Record, uid string, n int) {
	t.Helper()
	if len(recs) != n {
		t.Fatalf("%s: %d records, want %d", uid, len(recs), n)
	}
	for i, r := range recs {
		if r.SandboxUID != uid || r.Seq != int64(i+1) {
			t.Fatalf("%s: record %d is %s #%d, want #%d", uid, i, r.SandboxUID, r.Seq, i+1)
		}
	}
}

func TestSequencePerSandboxWithoutGaps(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "t.db"), Options{})
	var wg sync.WaitGroup
	for b := 0; b < 4; b++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				s.Add(record(fmt.Sprintf("sbx-%d", b), fmt.Sprintf("uid-%d", b), i))
			}
		}()
	}
	wg.Wait()
	if err := s.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	for b := 0; b < 4; b++ {
		recs, err := s.List(context.Background(), Filter{Namespace: "ns", Sandbox: fmt.Sprintf("sbx-%d", b)})
		if err != nil {
			t.Fatal(err)
		}
		wantSequence(t, recs, fmt.Sprintf("uid-%d", b), 200)
	}
	all, err := s.List(context.Background(), Filter{Namespace: "ns", Ticket: "tk-ns", Limit: 10000})
	if err != nil || len(all) != 800 {
		t.Fatalf("ticket: %d records, %v", len(all), err)
	}
	if other, _ := s.List(context.Background(), Filter{Namespace: "other", Sandbox: "sbx-0"}); len(other) != 0 {
		t.Fatalf("another namespace sees %d records", len(other))
	}
	if s.Dropped() != 0 || s.Written() != 800 {
		t.Fatalf("dropped %d, written %d", s.Dropped(), s.Written())
	}
}

// The child of TestCrashLosesNothingAcknowledged: it adds records and says
// which are acknowledged, until it is killed.
// refuseRecords has the database refuse every record of sandbox until
// the trigger is dropped.
const refuseRecords = `CREATE TRIGGER refuse BEFORE INSERT ON records WHEN NEW.sandbox = 'refused'
	BEGIN SELECT RAISE(ABORT, 'refused by the test'); END`

func TestACommitRefusedIsTriedAgainThenCountedAsDropped(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "t.db"), Options{})
	if _, err := s.db.Exec(refuseRecords); err != nil {
		t.Fatal(err)
	}
	// Refused for a while: the writer tries again and the batch lands whole.
	s.Add(record("refused", "uid-r", 0))
	s.Add(record("kept", "uid-k", 0))
	time.Sleep(2 * commitBackoff) // the first try was made and refused
	if _, err := s.db.Exec(`DROP TRIGGER refuse`); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatalf("a batch refused once was not committed on a later try: %v", err)
	}
	for sandbox, uid := range map[string]string{"refused": "uid-r", "kept": "uid-k"} {
		recs, err := s.List(ctx, Filter{Namespace: "ns", Sandbox: sandbox})
		if err != nil {
			t.Fatal(err)
		}
		wantSequence(t, recs, uid, 1)
	}
	// Refused for good: the batch is given up and counted, never lost unsaid.
	if _, err := s.db.Exec(refuseRecords); err != nil {
		t.Fatal(err)
	}
	s.Add(record("refused", "uid-r", 1))
	_ = s.Flush(ctx) // its error is the refusal when the flush shared the batch
	if got := s.Dropped(); got != 1 {
		t.Fatalf("dropped %d, want the 1 record refused at every try", got)
	}
}

func TestMain(m *testing.M) {
	if path := os.Getenv("AFE_TELEMETRY_CHILD"); path != "" {
		s, err := Open(path, Options{})
		if err != nil {
			fmt.Println("error", err)
			os.Exit(2)
		}
		for n := 0; ; {
			for i := 0; i < 7; i++ {
				s.Add(record("crash", "uid-crash", n))
				n++
			}
			if err := s.Flush(context.Background()); err != nil {
				fmt.Println("error", err)
				os.Exit(2)
			}
			fmt.Println("acked", n)
		}
	}
	os.Exit(m.Run())
}

func TestCrashLosesNothingAcknowledged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "crash.db")
	before := 0 // on disk before the round
	for round := 1; round <= 2; round++ {
		cmd := exec.Command(os.Args[0], "-test.run", "^$")
		cmd.Env = append(os.Environ(), "AFE_TELEMETRY_CHILD="+path)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		acked := 0
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) == 2 && f[0] == "acked" {
				acked, _ = strconv.Atoi(f[1])
			} else {
				t.Fatalf("child: %s", sc.Text())
			}
			if acked >= 300 {
				break
			}
		}
		// Killed mid-way: records may be queued or half-written.
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()

		s, err := Open(path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		recs, err := s.List(context.Background(), Filter{Namespace: "ns", Sandbox: "crash", Limit: 1_000_000})
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) < before+acked {
			t.Fatalf("round %d: %d records survived, %d were acknowledged (and %d there before)", round, len(recs), acked, before)
		}
		wantSequence(t, recs, "uid-crash", len(recs))
		t.Logf("round %d: %d acknowledged, %d on disk after SIGKILL", round, acked, len(recs))
		// The sequence goes on after the crash.
		s.Add(record("crash", "uid-crash", -1))
		if err := s.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		after, _ := s.List(context.Background(), Filter{Namespace: "ns", Sandbox: "crash", Limit: 1_000_000})
		wantSequence(t, after, "uid-crash", len(recs)+1)
		before = len(after)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestPruneByAgeAndSizeOldestFirst(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "prune.db"), Options{Retention: time.Hour})
	now := time.Now()
	for i := 0; i < 50; i++ {
		r := record("old", "uid-old", i)
		r.Ended = now.Add(-2 * time.Hour)
		s.Add(r)
	}
	for i := 0; i < 50; i++ {
		s.Add(record("new", "uid-new", i))
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if res, err := s.Prune(ctx, now, nil); err != nil || res.Removed() != 50 {
		t.Fatalf("pruned %d by age, %v; want the 50 old ones", res.Removed(), err)
	}
	if old, _ := s.List(ctx, Filter{Namespace: "ns", Sandbox: "old"}); len(old) != 0 {
		t.Fatalf("%d old records left", len(old))
	}
	if kept, _ := s.List(ctx, Filter{Namespace: "ns", Sandbox: "new"}); len(kept) != 50 {
		t.Fatalf("%d new records left", len(kept))
	}

	// By size: the oldest go first, and a sandbox's sequence goes on.
	for i := 0; i < 2000; i++ {
		r := record("big", "uid-big", i)
		r.Command = []string{"sh", "-c", strings.Repeat("x", 400)}
		s.Add(r)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	before, _ := s.Size(ctx)
	s.opts.MaxBytes = before / 2
	if _, err := s.Prune(ctx, now, nil); err != nil {
		t.Fatal(err)
	}
	after, _ := s.Size(ctx)
	if after > before/2 {
		t.Fatalf("size %d after pruning to %d (was %d)", after, before/2, before)
	}
	big, _ := s.List(ctx, Filter{Namespace: "ns", Sandbox: "big", Limit: 10000})
	if len(big) == 0 || len(big) == 2000 || big[len(big)-1].Seq != 2000 || big[0].Seq != int64(2000-len(big)+1) {
		t.Fatalf("after pruning by size: %d records, from #%d", len(big), big[0].Seq)
	}
	if gone, _ := s.List(ctx, Filter{Namespace: "ns", Sandbox: "new"}); len(gone) != 0 {
		t.Fatalf("the older sandbox kept %d records while newer ones went", len(gone))
	}
	s.Add(record("big", "uid-big", -1))
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	last, _ := s.List(ctx, Filter{Namespace: "ns", Sandbox: "big", Limit: 1})
	if len(last) != 1 || last[0].Seq != 2001 {
		t.Fatalf("the sequence after pruning: %+v", last)
	}
}

func TestSequenceOutlivesRetentionWhileTheSandboxExists(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "seq.db"), Options{Retention: time.Hour})
	for i := 0; i < 3; i++ {
		s.Add(record("live", "uid-live", i))
		s.Add(record("gone", "uid-gone", i))
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// Two hours later: every record is past the retention, both sandboxes
	// were quiet all that time, and only uid-live still exists.
	later := time.Now().Add(2 * time.Hour)
	if res, err := s.Prune(ctx, later, nil); err != nil || res.Removed() != 6 {
		t.Fatalf("pruned %d, %v; want the 6 records", res.Removed(), err)
	}
	if res, err := s.Prune(ctx, later, func(uid string) bool { return uid == "uid-live" }); err != nil || res.Removed() != 0 {
		t.Fatalf("pruned %d more, %v", res.Removed(), err)
	}
	s.Add(record("live", "uid-live", 3))
	s.Add(record("gone", "uid-gone", 3))
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	live, _ := s.List(ctx, Filter{Namespace: "ns", Sandbox: "live"})
	if len(live) != 1 || live[0].Seq != 4 {
		t.Fatalf("the live sandbox's sequence after its records went: %+v, want #4", live)
	}
	// The gone sandbox's sequence was forgotten (its UID never comes back;
	// the record here only shows the row went).
	gone, _ := s.List(ctx, Filter{Namespace: "ns", Sandbox: "gone"})
	if len(gone) != 1 || gone[0].Seq != 1 {
		t.Fatalf("the gone sandbox's sequence: %+v, want it forgotten", gone)
	}
}

func TestOutputMeasure(t *testing.T) {
	o := NewOutput()
	_, _ = o.Write([]byte("hello "))
	_, _ = o.Write([]byte("world\n"))
	n, sum := o.Sum()
	// sha256sum of "hello world\n"
	if n != 12 || sum != "a948904f2f0f479b8f8197694b30184b0d2ed1c1cd2a1ec0fb85d299a192a447" {
		t.Fatalf("%d %s", n, sum)
	}
}

// BenchmarkAdd measures the store's write throughput: records added and
// committed per second, and the memory the open store adds to the manager
// (the heap in use after a collection, its SQLite page cache included: the
// driver is pure Go).
func BenchmarkAdd(b *testing.B) {
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapInuse
	}
	before := heap()
	s, err := Open(filepath.Join(b.TempDir(), "bench.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	r := record("bench", "uid-bench", 0)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s.Add(r)
		if i%1024 == 1023 {
			_ = s.Flush(context.Background())
		}
	}
	_ = s.Flush(context.Background())
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
	b.StopTimer()
	if after := heap(); after > before {
		b.ReportMetric(float64(after-before)/(1<<20), "MiB-heap")
	}
	if s.Dropped() > 0 {
		b.Logf("%d dropped", s.Dropped())
	}
}
