package main

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

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
			Usage: accessv1.Usage{CPUMilliseconds: 1234_567, MemoryBytes: 12 << 20, DiskBytes: 3 << 29, WritableLayerBytes: 1 << 29,
				WorkspaceBytes: 1 << 30, NetworkReceiveBytes: 512, NetworkTransmitBytes: 2048}, Time: measured},
		// A Sandbox without a ticket, not measured yet.
		client.UsageRowOf(&afev1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "new"}}, nil),
		{Namespace: "b", Name: "odd\x1b[2J", Ticket: "odd", Sandboxes: 1, Measured: 1,
			Usage: accessv1.Usage{CPUMilliseconds: math.MaxInt64, MemoryBytes: math.MaxInt64}, Time: future},
	}
	perNamespace := []client.UsageRow{{Namespace: "a", Name: "a", Sandboxes: 1, Measured: 1,
		Usage: accessv1.Usage{CPUMilliseconds: 1234_567, MemoryBytes: 12 << 20, DiskBytes: 3 << 29,
			NetworkReceiveBytes: 512, NetworkTransmitBytes: 2048}, Time: measured}}
	tests := map[string]struct {
		by            string
		allNamespaces bool
		args          []string
		rows          []client.UsageRow
		want          string
	}{
		"per sandbox": {by: "sandbox", rows: rows, want: `
NAME           TICKET   CPU-TIME         MEMORY   DISK    NET-RX   NET-TX   MEASURED
t1             t1       20m34s           12Mi     1.5Gi   512      2Ki      45s ago
new                     -                -        -       -        -        -
"odd\x1b[2J"   odd      2562047788015h   7.9Ei    0       0        0        in the future
`},
		"per sandbox, wide: the parts of DISK": {by: "sandbox", rows: rows[:1], args: []string{"-o", "wide"}, want: `
NAME   TICKET   CPU-TIME   MEMORY   DISK    WRITABLE-LAYER   WORKSPACE   NET-RX   NET-TX   MEASURED
t1     t1       20m34s     12Mi     1.5Gi   512Mi            1Gi         512      2Ki      45s ago
`},
		"per ticket, all namespaces, no headers": {by: "ticket", allNamespaces: true, rows: rows, args: []string{"--no-headers"}, want: `
a     t1             1     20m34s           12Mi    1.5Gi   512   2Ki   45s ago
b     new            1     -                -       -       -     -     -
b     "odd\x1b[2J"   1     2562047788015h   7.9Ei   0       0     0     in the future
`},
		"per namespace": {by: "namespace", rows: perNamespace, want: `
NAMESPACE   SANDBOXES   CPU-TIME   MEMORY   DISK    NET-RX   NET-TX   MEASURED
a           1           20m34s     12Mi     1.5Gi   512      2Ki      45s ago
`},
		// As written: the escaper of a terminal escapes it.
		"jsonpath, int64s exact": {by: "sandbox", rows: rows, args: []string{"-o", `jsonpath={range .items[*]}{.name}:{.ticket}:{.cpuMilliseconds}{"\n"}{end}`},
			want: "t1:t1:1234567\nnew::0\nodd\x1b[2J:odd:9223372036854775807\n"},
		"a go template": {by: "ticket", rows: perNamespace, args: []string{"--template", `{{.kind}} {{.apiVersion}} {{.by}} {{len .items}}`}, want: `
UsageList access.sandbox.afe.dev/v1alpha1 ticket 1`},
		"yaml": {by: "namespace", rows: perNamespace, args: []string{"-o", "yaml"}, want: `
apiVersion: access.sandbox.afe.dev/v1alpha1
by: namespace
items:
- cpuMilliseconds: 1234567
  diskBytes: 1610612736
  measured: 1
  memoryBytes: 12582912
  name: a
  namespace: a
  networkReceiveBytes: 512
  networkTransmitBytes: 2048
  sandboxes: 1
  time: "2026-12-03T09:59:15Z"
  workspaceBytes: 0
  writableLayerBytes: 0
kind: UsageList
`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := &topFlags{by: tc.by, opts: client.TopOptions{AllNamespaces: tc.allNamespaces}, output: parseOutput(t, tc.args...)}
			out, errOut := printed(t, func(streams genericiooptions.IOStreams) error {
				return writeTop(streams, tc.rows, f, now, "none")
			})
			if diff := cmp.Diff(strings.TrimPrefix(tc.want, "\n"), out); diff != "" {
				t.Errorf("-want +got:\n%s", diff)
			}
			if errOut != "" {
				t.Errorf("stderr: %q", errOut)
			}
		})
	}
}

func TestTopJSON(t *testing.T) {
	measured := metav1.NewTime(time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC))
	rows := []client.UsageRow{{Namespace: "a", Name: "t1", Sandboxes: 2, Measured: 1,
		Usage: accessv1.Usage{CPUMilliseconds: 1500, MemoryBytes: 42}, Time: measured}}
	f := &topFlags{by: "ticket", output: parseOutput(t, "-o", "json")}
	out, _ := printed(t, func(streams genericiooptions.IOStreams) error { return writeTop(streams, rows, f, time.Now(), "none") })
	var got map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	want := map[string]any{"kind": "UsageList", "apiVersion": "access.sandbox.afe.dev/v1alpha1", "by": "ticket", "items": []any{map[string]any{
		"namespace": "a", "name": "t1", "sandboxes": float64(2), "measured": float64(1), "cpuMilliseconds": float64(1500),
		"memoryBytes": float64(42), "diskBytes": float64(0), "writableLayerBytes": float64(0), "workspaceBytes": float64(0),
		"networkReceiveBytes": float64(0), "networkTransmitBytes": float64(0), "time": "2026-12-03T10:00:00Z",
	}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("-want +got:\n%s", diff)
	}

	f.by = "sandbox"
	out, errOut := printed(t, func(streams genericiooptions.IOStreams) error { return writeTop(streams, nil, f, time.Now(), "none") })
	if !strings.Contains(out, `"items": []`) || errOut != "" {
		t.Errorf("no rows are an empty list, not null, and nothing on stderr:\n%s%s", out, errOut)
	}
	f.output = parseOutput(t)
	out, errOut = printed(t, func(streams genericiooptions.IOStreams) error {
		return writeTop(streams, nil, f, time.Now(), "No resources found in ns namespace.")
	})
	if out != "" || errOut != "No resources found in ns namespace.\n" {
		t.Errorf("no rows as a table: nothing on stdout (%q) and kubectl's words on stderr (%q)", out, errOut)
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
		"a bad -o, before connecting":   {args: []string{"top", "-o", "table"}, want: `-o table: unable to match a printer suitable for the output format "table"`},
		"-o name is none of its":        {args: []string{"top", "-o", "name"}, want: "unable to match a printer"},
		"-o wide parses and connects":   {args: []string{"top", "-o", "wide", "--no-headers"}, want: "127.0.0.1:1"},
		"-o jsonpath parses":            {args: []string{"top", "-o", "jsonpath={.items[*].name}"}, want: "127.0.0.1:1"},
		"a bad jsonpath":                {args: []string{"top", "-o", "jsonpath={.items["}, want: "error parsing jsonpath"},
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
