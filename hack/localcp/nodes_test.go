package main

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestNodeArgs(t *testing.T) {
	tests := map[string]struct {
		command []string
		node    string
		want    []string
	}{
		"the flags of the node come last": {
			command: []string{"manager", "--x"},
			node:    "node-2",
			want:    []string{"manager", "--x", "--per-node", "--instance=node-2"},
		},
		"{node} is replaced anywhere, as often as it is there": {
			command: []string{"m", "--run-log-dir=bin/local/{node}/run-logs", "{node}:{node}"},
			node:    "node-3",
			want:    []string{"m", "--run-log-dir=bin/local/node-3/run-logs", "node-3:node-3", "--per-node", "--instance=node-3"},
		},
		"{node-i}ARG is ARG for node-i": {
			command: []string{"m", "{node-1}--access-register", "{node-1}--dir={node}"},
			node:    "node-1",
			want:    []string{"m", "--access-register", "--dir=node-1", "--per-node", "--instance=node-1"},
		},
		"{node-i}ARG is left out for the other nodes": {
			command: []string{"m", "{node-1}--access-register", "{node-11}--x", "--y"},
			node:    "node-10",
			want:    []string{"m", "--y", "--per-node", "--instance=node-10"},
		},
		"braces that name no node stay": {
			command: []string{"m", "{x}y", "{node", "{}"},
			node:    "node-1",
			want:    []string{"m", "{x}y", "{node", "{}", "--per-node", "--instance=node-1"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, nodeArgs(tc.command, tc.node)); diff != "" {
				t.Errorf("nodeArgs (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMemTotal(t *testing.T) {
	tests := map[string]struct {
		meminfo string
		want    int64
		wantErr bool
	}{
		"kB":           {meminfo: "MemTotal:       24683584 kB\nMemFree:        18821760 kB\n", want: 24683584 << 10},
		"not first":    {meminfo: "Foo: 1 kB\nMemTotal: 2 kB", want: 2048},
		"missing":      {meminfo: "MemFree: 1 kB\n", wantErr: true},
		"another unit": {meminfo: "MemTotal: 1 MB\n", wantErr: true},
		"not a number": {meminfo: "MemTotal: x kB\n", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := memTotal(tc.meminfo)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("memTotal = %d, %v; want %d, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestPrefixWriter(t *testing.T) {
	tests := map[string]struct {
		writes []string
		want   string
	}{
		"whole lines":                {writes: []string{"a\nb\n"}, want: "[n] a\n[n] b\n"},
		"a line in pieces":           {writes: []string{"a", "b", "c\nd"}, want: "[n] abc\n[n] d\n"},
		"a last line without an end": {writes: []string{"a\nb"}, want: "[n] a\n[n] b\n"},
		"empty lines":                {writes: []string{"\n\n"}, want: "[n] \n[n] \n"},
		"nothing":                    {},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			w := newPrefixWriter(&out, "n")
			for _, s := range tc.writes {
				if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
					t.Fatalf("Write(%q) = %d, %v", s, n, err)
				}
			}
			w.Flush()
			if diff := cmp.Diff(tc.want, out.String()); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
		})
	}
}
