package loops

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/egresslog"
	"afe.dev/sandbox/internal/sandboxspec"
	"afe.dev/sandbox/internal/telemetry"
)

// The lines squid 5.7 in the proxy image writes (docker/egress-proxy,
// TestProxyImage reads the first from the real image): a connection
// closed before it sent anything, and a request denied.
const (
	emptyLine   = "status=NONE_NONE/000 why=- up=0 down=0 method=- url=error:transaction-end-before-headers"
	deniedLine  = "status=TCP_DENIED/403 why=host up=90 down=3900 method=GET url=http://denied.test/"
	squidClient = "172.19.0.4"
)

// squidLine is one decision line of the proxy's log, logged at.
func squidLine(at time.Time, rest string) docker.LogLine {
	return docker.LogLine{Time: at, Text: fmt.Sprintf("afe-egress v1 time=%d.%03d ms=0 client=%s %s",
		at.Unix(), at.Nanosecond()/int(time.Millisecond), squidClient, rest)}
}

// Connections that carried no request are recorded in aggregate: a flood
// of 1,000 in 5 s is one record that counts them, recorded before the
// request that follows it (the order of the log kept); those after it
// make one record a window at most, and the last window's is recorded
// once the log ends. The place of each record is its last line's.
func TestEmptyConnectionsAreRecordedInAggregate(t *testing.T) {
	var got []telemetry.Egress
	p := &proxyLog{proxy: "proxy-1", id: sandboxspec.Identity{Namespace: "ns", Name: "box", UID: "uid", Ticket: "tk"},
		add: func(e telemetry.Egress) error { got = append(got, e); return nil }}
	base := time.Unix(1765090000, 0).UTC()
	var lines []docker.LogLine
	for i := range 1000 {
		lines = append(lines, squidLine(base.Add(time.Duration(i)*5*time.Millisecond), emptyLine))
	}
	lines = append(lines, squidLine(base.Add(6*time.Second), deniedLine))
	for _, s := range []int{7, 12, 18} {
		lines = append(lines, squidLine(base.Add(time.Duration(s)*time.Second), emptyLine))
	}
	for _, l := range lines {
		if err := p.line(l); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.flushEmpty(time.Time{}); err != nil {
		t.Fatal(err)
	}
	type row struct {
		Connections       int64
		Reason            string
		Time              time.Time
		Duration          time.Duration
		CursorAt          time.Time
		Host, Status, Dec string
	}
	var rows []row
	for _, e := range got {
		r := e.Record
		rows = append(rows, row{r.Connections, r.Reason, r.Time, r.Duration.Duration, e.Cursor.At, r.Host, r.Status, r.Decision})
	}
	s := func(n float64) time.Time { return base.Add(time.Duration(n * float64(time.Second))) }
	want := []row{
		{1000, egresslog.ReasonEmpty, base, 4995 * time.Millisecond, s(4.995), egresslog.EmptyURL, "NONE_NONE/000", "Denied"},
		{0, egresslog.ReasonHost, s(6), 0, s(6), "denied.test", "TCP_DENIED/403", "Denied"},
		{2, egresslog.ReasonEmpty, s(7), 5 * time.Second, s(12), egresslog.EmptyURL, "NONE_NONE/000", "Denied"},
		{1, egresslog.ReasonEmpty, s(18), 0, s(18), egresslog.EmptyURL, "NONE_NONE/000", "Denied"},
	}
	if diff := cmp.Diff(want, rows); diff != "" {
		t.Fatal(diff)
	}
}
