package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRemoteArg(t *testing.T) {
	tests := map[string]struct {
		arg           string
		sandbox, path string
		ok            bool
	}{
		"sandbox and path":      {arg: "box:/workspace/a", sandbox: "box", path: "/workspace/a", ok: true},
		"a local path":          {arg: "./box:/workspace"},
		"a relative remote":     {arg: "box:workspace/a"},
		"no sandbox":            {arg: ":/workspace/a"},
		"a plain local file":    {arg: "notes.txt"},
		"a local path with a :": {arg: "/tmp/a:/workspace"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			sandbox, p, ok := remoteArg(tc.arg)
			if d := cmp.Diff([]any{tc.sandbox, tc.path, tc.ok}, []any{sandbox, p, ok}); d != "" {
				t.Error(d)
			}
		})
	}
}
