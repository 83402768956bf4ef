package access

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	accessv1 "afe.dev/sandbox/api/access/v1alpha1"
	"afe.dev/sandbox/internal/telemetry"
)

// An answer says what the size bounds pruned of its sandbox's records of
// its kind, and only that: the egress answer of the sandbox whose
// namespace went over its share names how many of its egress records went
// and through which seq; its commands' answer, and another namespace's
// sandbox's, name nothing.
func TestTelemetryAnswersSayWhatWasPruned(t *testing.T) {
	ctx := context.Background()
	store, err := telemetry.Open(filepath.Join(t.TempDir(), "t.db"), telemetry.Options{NamespaceMaxRecords: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = store.Close() }()
	now := time.Now().UTC()
	for _, ns := range []string{"loud", "quiet"} {
		store.Add(telemetry.Record{Namespace: ns, Sandbox: "box", SandboxUID: "uid-" + ns, Started: now, Ended: now, Command: []string{"true"}})
	}
	for i := range 8 {
		if err := store.AddEgress(ctx, telemetry.Egress{Record: telemetry.EgressRecord{Namespace: "loud", Sandbox: "box", SandboxUID: "uid-loud",
			Time: now, Host: fmt.Sprintf("h%d.test", i), Decision: accessv1.EgressDenied, Proxy: "p"}, Cursor: telemetry.Cursor{At: now, N: i}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Prune(ctx, now, nil); err != nil {
		t.Fatal(err)
	}
	s := &Server{opts: Options{Telemetry: store}}
	answer := func(ns, query string) accessv1.EgressRecordList {
		w := httptest.NewRecorder()
		s.serveSandboxTelemetry(w, httptest.NewRequest(http.MethodGet, "/x?"+query, nil), &request{namespace: ns, name: "box"})
		var list accessv1.EgressRecordList
		if err := json.Unmarshal(w.Body.Bytes(), &list); w.Code != http.StatusOK || err != nil {
			t.Fatalf("%d %v: %s", w.Code, err, w.Body)
		}
		return list
	}
	eg := answer("loud", "egress=true")
	if len(eg.Items) != 5 || len(eg.Pruned) != 1 || eg.Pruned[0].Records != 3 || eg.Pruned[0].ThroughSeq != 4 || eg.Pruned[0].SandboxUID != "uid-loud" {
		t.Fatalf("the egress answer: %d items, pruned %+v", len(eg.Items), eg.Pruned)
	}
	if cmds := answer("loud", ""); len(cmds.Items) != 1 || cmds.Pruned != nil {
		t.Fatalf("the commands' answer: %d items, pruned %+v", len(cmds.Items), cmds.Pruned)
	}
	if other := answer("quiet", "egress=true"); other.Pruned != nil {
		t.Fatalf("another namespace's answer: pruned %+v", other.Pruned)
	}
}
