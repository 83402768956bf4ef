package loops

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/sandboxspec"
	"afe.dev/sandbox/internal/telemetry"
)

// BenchmarkEgressRecords100Proxies is the path of a decision from the line
// a proxy's log gives to its commit in the store, for 100 busy proxies at
// once: each of 100 goroutines turns lines into records (parse, identity,
// cursor) as fast as it can; the figure is the records committed per
// second (records/s); none may be dropped (the follower waits for room in
// the store's queue).
func BenchmarkEgressRecords100Proxies(b *testing.B) {
	const proxies = 100
	store, err := telemetry.Open(filepath.Join(b.TempDir(), "t.db"), telemetry.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = store.Close() }()
	perProxy := max(b.N/proxies, 1)
	start := time.Now()
	b.ResetTimer()
	var wg sync.WaitGroup
	for p := range proxies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := sandboxspec.Identity{Namespace: "ns", Name: fmt.Sprintf("box-%d", p), UID: fmt.Sprintf("uid-%d", p), Ticket: "tk"}
			add := func(e telemetry.Egress) error { return store.AddEgress(context.Background(), e) }
			pl := &proxyLog{proxy: fmt.Sprintf("proxy-%d", p), id: id, add: add}
			at := time.Now()
			for i := range perProxy {
				line := decisionLine("172.19.0.4", "-", fmt.Sprintf("host-%d.example.com", i%50))
				if err := pl.line(docker.LogLine{Time: at.Add(time.Duration(i) * time.Microsecond), Text: line}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := store.Flush(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	secs := time.Since(start).Seconds()
	b.ReportMetric(float64(store.Written())/secs, "records/s")
	b.ReportMetric(float64(store.Dropped()), "dropped")
}
