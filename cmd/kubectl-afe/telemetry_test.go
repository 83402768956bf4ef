package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/yaml"

	accessv1 "afe.dev/sandbox/api/access/v1alpha1"
	"afe.dev/sandbox/internal/telemetry"
)

// printLines prints the list or its table as the flags ask, and returns
// the lines printed.
func printLines(t *testing.T, args []string, list any, table func() *metav1.Table) []string {
	t.Helper()
	out, _ := printed(t, func(streams genericiooptions.IOStreams) error {
		return parseOutput(t, args...).write(streams, list, table, "none")
	})
	return strings.Split(strings.TrimRight(out, "\n"), "\n")
}

func TestRecordsTable(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	list := &telemetry.RecordList{Kind: accessv1.CommandRecordListKind, APIVersion: accessv1.SchemeGroupVersion.String(), Items: []telemetry.Record{
		{Sandbox: "box", Seq: 1, Source: telemetry.SourceRun, Started: t0, Ended: t0.Add(1500 * time.Millisecond), ExitCode: 0,
			User: "1000:2000000001", Run: "build", Attempt: 2, StartedBy: "Run ns/build", Command: []string{"/bin/sh", "-c", "make test"},
			OutputBytes: 3 << 10, OutputSHA256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"},
		{Sandbox: "box", Seq: 2, Source: telemetry.SourceEngine, Started: t0, Ended: t0, ExitCode: 4,
			Command: []string{"printf", "a\nb\x1b[2J", ""}},
	}}
	table := func(withSandbox bool) func() *metav1.Table {
		return func() *metav1.Table { return recordsTable(list.Items, withSandbox) }
	}
	lines := printLines(t, nil, list, table(true))
	if len(lines) != 3 {
		t.Fatalf("a header and a line a record:\n%s", strings.Join(lines, "\n"))
	}
	if d := cmp.Diff(strings.Fields("SANDBOX SEQ SOURCE STARTED DURATION EXIT USER RUN STARTED BY COMMAND"), strings.Fields(lines[0])); d != "" {
		t.Errorf("header: %s", d)
	}
	for _, want := range []string{"box", "1", "Run", "2026-12-01T10:00:00Z", "1.5s", "1000:2000000001", "build#2", `/bin/sh -c "make test"`} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("line %q lacks %q", lines[1], want)
		}
	}
	if strings.Contains(lines[1], "3Ki") {
		t.Errorf("the output's size is a wide column: %q", lines[1])
	}
	if !strings.Contains(lines[2], `printf "a\nb\x1b[2J" ""`) || strings.ContainsRune(lines[2], 0x1b) {
		t.Errorf("a command with controls is quoted: %q", lines[2])
	}

	lines = printLines(t, []string{"-o", "wide"}, list, table(false))
	if d := cmp.Diff(strings.Fields("SEQ SOURCE STARTED DURATION EXIT USER RUN STARTED BY OUTPUT OUTPUT-SHA256 COMMAND"), strings.Fields(lines[0])); d != "" {
		t.Errorf("wide header, by sandbox: %s", d)
	}
	if f := strings.Fields(lines[1]); len(f) < 13 || f[0] != "1" || f[9] != "3Ki" || f[10] != "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08" {
		t.Errorf("wide line: %q", lines[1])
	}

	lines = printLines(t, []string{"--no-headers"}, list, table(false))
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "1 ") {
		t.Errorf("no headers: %q", lines)
	}

	lines = printLines(t, []string{"-o", "jsonpath={range .items[*]}{.seq} {.command[0]}{\"\\n\"}{end}"}, list, nil)
	if d := cmp.Diff([]string{"1 /bin/sh", "2 printf"}, lines); d != "" {
		t.Errorf("jsonpath: %s", d)
	}
}

// -o json prints the list as the access API answers it: a client that
// reads the API's answer reads the plugin's.
func TestRecordsJSON(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	list := &telemetry.RecordList{Kind: accessv1.CommandRecordListKind, APIVersion: accessv1.SchemeGroupVersion.String(),
		Items:      []telemetry.Record{{Namespace: "ns", Sandbox: "box", SandboxUID: "u", Seq: 1, Source: telemetry.SourceAPI, Started: t0, Ended: t0.Add(time.Second), Command: []string{"true"}}},
		Unanswered: []accessv1.UnansweredNode{{Node: "n3", Message: "gone"}},
		Pruned:     []accessv1.PrunedRecords{{Sandbox: "box", SandboxUID: "u", Records: 5, ThroughSeq: 5, Last: t0}},
	}
	for _, format := range []string{"json", "yaml"} {
		out, _ := printed(t, func(streams genericiooptions.IOStreams) error {
			return parseOutput(t, "-o", format).write(streams, list, nil, "none")
		})
		got := &telemetry.RecordList{}
		if err := yamlOrJSON(format, out, got); err != nil {
			t.Fatalf("-o %s: %v\n%s", format, err, out)
		}
		if d := cmp.Diff(list, got); d != "" {
			t.Errorf("-o %s: -want +got:\n%s", format, d)
		}
	}
}

func TestEgressTable(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	recs := []telemetry.EgressRecord{
		{Sandbox: "box", Seq: 3, Time: t0, Decision: "Allowed", Method: "CONNECT", Host: "pypi.org", Port: 443, BytesUp: 517, BytesDown: 6000,
			Running: []string{"Run/build"}, Status: "TCP_TUNNEL/200", Proxy: "0123456789abcdef0123"},
		{Sandbox: "box", Seq: 4, Time: t0, Decision: "Denied", Reason: "host", Method: "GET", Host: "evil.test\n5\tforged\x1b[2J", Port: 80},
	}
	list := &telemetry.EgressRecordList{Kind: accessv1.EgressRecordListKind, APIVersion: accessv1.SchemeGroupVersion.String(), Items: recs}
	lines := printLines(t, nil, list, func() *metav1.Table { return egressTable(recs, true) })
	if len(lines) != 3 {
		t.Fatalf("a header and a line a record:\n%s", strings.Join(lines, "\n"))
	}
	for _, want := range []string{"box", "3", "Allowed", "CONNECT", "pypi.org", "443", "517", "6000", "Run/build"} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("line %q lacks %q", lines[1], want)
		}
	}
	if strings.Contains(lines[1], "TCP_TUNNEL") {
		t.Errorf("the proxy's status is a wide column: %q", lines[1])
	}
	if !strings.Contains(lines[2], `"evil.test\n5\tforged\x1b[2J"`) || strings.ContainsRune(lines[2], 0x1b) || !strings.Contains(lines[2], "host") {
		t.Errorf("a host with controls is quoted: %q", lines[2])
	}

	lines = printLines(t, []string{"-o", "wide"}, list, func() *metav1.Table { return egressTable(recs, false) })
	if !strings.HasSuffix(lines[0], "STATUS           PROXY") || !strings.HasSuffix(lines[1], "TCP_TUNNEL/200   0123456789ab") {
		t.Errorf("wide: the proxy's status and its container, short:\n%s", strings.Join(lines, "\n"))
	}
}

// yamlOrJSON reads what -o json or -o yaml printed.
func yamlOrJSON(format, out string, into any) error {
	if format == "yaml" {
		return yaml.Unmarshal([]byte(out), into)
	}
	return json.Unmarshal([]byte(out), into)
}

func TestTelemetryUsage(t *testing.T) {
	kc := kubeconfigNowhere(t)
	tests := map[string]struct {
		args []string
		want string
	}{
		"-o wide and --no-headers parse, and it connects": {args: []string{"telemetry", "box", "-o", "wide", "--no-headers"}, want: "127.0.0.1:1"},
		"-o yaml of the egress":                           {args: []string{"telemetry", "--ticket", "t", "--egress", "-o", "yaml"}, want: "127.0.0.1:1"},
		"-o jsonpath":                                     {args: []string{"telemetry", "box", "-o", "jsonpath={.items[*].seq}"}, want: "127.0.0.1:1"},
		"a bad -o, before connecting":                     {args: []string{"telemetry", "box", "-o", "table"}, want: "unable to match a printer"},
		"--denied without --egress":                       {args: []string{"telemetry", "box", "--denied"}, want: "exit 2"},
		"both a sandbox and a ticket":                     {args: []string{"telemetry", "box", "--ticket", "t"}, want: "exit 2"},
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
