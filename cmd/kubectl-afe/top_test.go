package main

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	accessv1 "afe.dev/sandbox/api/access/v1alpha1"
	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/client"
)

func TestTopTable(t *testing.T) {
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	measured := metav1.NewTime(now.Add(-45 * time.Second))
	future := metav1.NewTime(now.Add(time.Hour))
	rows := []client.UsageRow{
		{Namespace: "a", Name: "t1", Ticket: "t1", Sandboxes: 1, Measured: 1,
			Usage: accessv1.Usage{CPUMilliseconds: 1234_567, MemoryBytes: 12 << 20, DiskBytes: 3 << 29,
				NetworkReceiveBytes: 512, NetworkTransmitBytes: 2048}, Time: measured},
		// A Sandbox without a ticket, not measured yet.
		client.UsageRowOf(&afev1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "new"}}, nil),
		{Namespace: "b", Name: "odd\x1b[2J", Ticket: "odd", Sandboxes: 1, Measured: 1,
			Usage: accessv1.Usage{CPUMilliseconds: math.MaxInt64, MemoryBytes: math.MaxInt64}, Time: future},
	}
	tests := map[string]struct {
		flags topFlags
		want  string
	}{
		"per sandbox": {flags: topFlags{by: "sandbox"}, want: `
NAME           TICKET   CPU-TIME         MEMORY(bytes)   DISK(bytes)   NET-RX(bytes)   NET-TX(bytes)   MEASURED
t1             t1       20m34s           12Mi            1.5Gi         512             2Ki             45s ago
new            <none>   -                -               -             -               -               -
"odd\x1b[2J"   odd      2562047788015h   7.9Ei           0             0               0               in the future
`},
		"per ticket, all namespaces, no headers": {flags: topFlags{by: "ticket", noHeaders: true, opts: client.TopOptions{AllNamespaces: true}}, want: `
a   t1             1   20m34s           12Mi    1.5Gi   512   2Ki   45s ago
b   new            1   -                -       -       -     -     -
b   "odd\x1b[2J"   1   2562047788015h   7.9Ei   0       0     0     in the future
`},
		"per namespace": {flags: topFlags{by: "namespace"}, want: `
NAMESPACE   SANDBOXES   CPU-TIME   MEMORY(bytes)   DISK(bytes)   NET-RX(bytes)   NET-TX(bytes)   MEASURED
a           1           20m34s     12Mi            1.5Gi         512             2Ki             45s ago
`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			in := rows
			if tc.flags.by == "namespace" {
				in = []client.UsageRow{{Namespace: "a", Name: "a", Sandboxes: 1, Measured: 1,
					Usage: accessv1.Usage{CPUMilliseconds: 1234_567, MemoryBytes: 12 << 20, DiskBytes: 3 << 29,
						NetworkReceiveBytes: 512, NetworkTransmitBytes: 2048}, Time: measured}}
			}
			tc.flags.output = "table"
			var out strings.Builder
			if err := writeTop(&out, in, &tc.flags, now); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(strings.TrimPrefix(tc.want, "\n"), out.String()); diff != "" {
				t.Errorf("-want +got:\n%s", diff)
			}
		})
	}
}

func TestTopJSON(t *testing.T) {
	measured := metav1.NewTime(time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC))
	rows := []client.UsageRow{{Namespace: "a", Name: "t1", Sandboxes: 2, Measured: 1,
		Usage: accessv1.Usage{CPUMilliseconds: 1500, MemoryBytes: 42}, Time: measured}}
	var out strings.Builder
	if err := writeTop(&out, rows, &topFlags{by: "ticket", output: "json"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(out.String()), &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out.String())
	}
	want := map[string]any{"by": "ticket", "items": []any{map[string]any{
		"namespace": "a", "name": "t1", "sandboxes": float64(2), "measured": float64(1), "cpuMilliseconds": float64(1500),
		"memoryBytes": float64(42), "diskBytes": float64(0), "writableLayerBytes": float64(0), "workspaceBytes": float64(0),
		"networkReceiveBytes": float64(0), "networkTransmitBytes": float64(0), "time": "2026-12-03T10:00:00Z",
	}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("-want +got:\n%s", diff)
	}

	out.Reset()
	if err := writeTop(&out, nil, &topFlags{by: "sandbox", output: "json"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"items": []`) {
		t.Errorf("no rows are an empty list, not null:\n%s", out.String())
	}
}

func TestTopFigures(t *testing.T) {
	tests := map[string]struct{ got, want string }{
		"ms":             {cpuTime(850), "850ms"},
		"negative ms":    {cpuTime(-5), "0ms"},
		"seconds":        {cpuTime(12_345), "12.3s"},
		"minutes":        {cpuTime(1_234_567), "20m34s"},
		"hours":          {cpuTime(3*3_600_000 + 125_000), "3h2m5s"},
		"bytes":          {bytesOf(1023), "1023"},
		"negative bytes": {bytesOf(-1), "0"},
		"Ki":             {bytesOf(1024), "1Ki"},
		"just below 2Ki": {bytesOf(2047), "1.9Ki"},
		"Mi":             {bytesOf(300 << 20), "300Mi"},
		"largest":        {bytesOf(math.MaxInt64), "7.9Ei"},
	}
	for name, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("%s: got %q, want %q", name, tc.got, tc.want)
		}
	}
}

func TestTopUsage(t *testing.T) {
	kc := kubeconfigNowhere(t)
	tests := map[string]struct {
		args []string
		want string
	}{
		"flags parse and it connects":   {args: []string{"top", "-A", "--by", "ticket", "--sort-by", "cpu", "-l", "a=b", "-o", "json"}, want: "127.0.0.1:1"},
		"a bad --by, before connecting": {args: []string{"top", "--by", "pod"}, want: `by "pod"`},
		"a bad --sort-by":               {args: []string{"top", "--sort-by", "cores"}, want: `sort by "cores"`},
		"a bad -o":                      {args: []string{"top", "-o", "yaml"}, want: "exit 2"},
		"no arguments":                  {args: []string{"top", "box"}, want: "unknown command"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := execute(append([]string{"--kubeconfig", kc, "--request-timeout", "2s"}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want an error with %q, got %v", tc.want, err)
			}
		})
	}
}
