package main

import (
	"flag"
	"testing"

	"github.com/go-logr/logr"
)

// --max-pool-replicas is 50 unless set, 0 keeps no member, and a negative
// value stops the manager at start.
func TestMaxPoolReplicas(t *testing.T) {
	tests := map[string]struct {
		args    []string
		want    int
		wantErr bool
	}{
		"default":  {want: 50},
		"zero":     {args: []string{"--max-pool-replicas=0"}, want: 0},
		"set":      {args: []string{"--max-pool-replicas=7"}, want: 7},
		"negative": {args: []string{"--max-pool-replicas=-1"}, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			fs := flag.NewFlagSet("manager", flag.ContinueOnError)
			f := bindFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err := setupOptions(logr.Discard(), f)
			if (err != nil) != tc.wantErr {
				t.Fatalf("setupOptions: %v, want an error: %v", err, tc.wantErr)
			}
			if !tc.wantErr && f.opts.MaxPoolReplicas != tc.want {
				t.Fatalf("MaxPoolReplicas = %d, want %d", f.opts.MaxPoolReplicas, tc.want)
			}
		})
	}
}
