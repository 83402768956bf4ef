package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseGlobals(t *testing.T) {
	tests := map[string]struct {
		args     []string
		instance string
		rest     []string
		wantErr  bool
	}{
		"default instance":        {args: []string{"shell", "s"}, instance: "default", rest: []string{"shell", "s"}},
		"--instance NAME":         {args: []string{"--instance", "e2e", "shell", "s"}, instance: "e2e", rest: []string{"shell", "s"}},
		"--instance=NAME after":   {args: []string{"shell", "s", "--instance=e2e"}, instance: "e2e", rest: []string{"shell", "s"}},
		"the command's own flags": {args: []string{"shell", "s", "--", "x", "--instance", "y"}, instance: "default", rest: []string{"shell", "s", "--", "x", "--instance", "y"}},
		"empty instance":          {args: []string{"--instance=", "shell", "s"}, wantErr: true},
		"missing value":           {args: []string{"shell", "s", "--instance"}, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g, rest, err := parseGlobals(tc.args)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("got instance %q, rest %q; want an error", g.instance, rest)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.instance, g.instance); d != "" {
				t.Error(d)
			}
			if d := cmp.Diff(tc.rest, rest); d != "" {
				t.Error(d)
			}
		})
	}
}
