package main

import (
	"testing"

	"afe.dev/sandbox/docker"
)

// A shell runs as the container's uid:gid and nothing else: a bare uid would
// let the image's /etc/group add supplementary groups.
func TestShellUser(t *testing.T) {
	tests := map[string]struct {
		user    string
		wantErr bool
	}{
		"uid:gid":      {user: "1000:1000"},
		"other group":  {user: "1000:2000"},
		"bare uid":     {user: "1000", wantErr: true},
		"empty":        {user: "", wantErr: true},
		"a name":       {user: "sandbox", wantErr: true},
		"name:group":   {user: "sandbox:sandbox", wantErr: true},
		"root's group": {user: "1000:0", wantErr: true},
		"root":         {user: "0:0", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := shellUser(&docker.Container{Name: "afe-ns.s", User: tc.user})
			if (err != nil) != tc.wantErr {
				t.Fatalf("shellUser(%q) = %q, %v", tc.user, got, err)
			}
			if err == nil && got != tc.user {
				t.Fatalf("shellUser(%q) = %q", tc.user, got)
			}
		})
	}
}
