package enginespec

import "testing"

func TestUserSpaceKernel(t *testing.T) {
	tests := map[string]struct {
		rt   Runtime
		want bool
	}{
		"runc":                {rt: Runtime{Name: "runc", Path: "runc"}, want: false},
		"the engine's own":    {rt: Runtime{Name: "runc", Type: "io.containerd.runc.v2"}, want: false},
		"runsc by its binary": {rt: Runtime{Name: "gvisor", Path: "/usr/bin/runsc", Args: []string{"--platform=ptrace"}}, want: true},
		"runsc as a shim":     {rt: Runtime{Name: "runsc", Type: "io.containerd.runsc.v1"}, want: true},
		"runsc in a folder":   {rt: Runtime{Name: "x", Path: "/opt/runsc/bin/runc"}, want: false},
		"kata":                {rt: Runtime{Name: "kata", Type: "io.containerd.kata.v2"}, want: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := tc.rt.UserSpaceKernel(); got != tc.want {
				t.Errorf("UserSpaceKernel() of %+v = %v, want %v", tc.rt, got, tc.want)
			}
		})
	}
}

// The bound is each file's size and one entry past it, for every file.
func TestLogConfigBound(t *testing.T) {
	l := LogConfig{MaxFileBytes: 1 << 20, Files: 3}
	if got, want := l.Bound(), int64(3*(1<<20+16<<10+256)); got != want {
		t.Errorf("Bound() = %d, want %d", got, want)
	}
	if got := (LogConfig{}).Bound(); got != 0 {
		t.Errorf("Bound() of no files = %d, want 0", got)
	}
}

func TestHostNetwork(t *testing.T) {
	for _, tc := range []struct {
		rt   Runtime
		want bool
	}{
		{Runtime{Name: "runsc", Path: "/usr/bin/runsc", Args: []string{"--platform=ptrace", "--network=host"}}, true},
		{Runtime{Name: "runsc", Path: "/usr/bin/runsc", Args: []string{"-network", "host"}}, true},
		{Runtime{Name: "runsc", Path: "/usr/local/lib/afe/runsc-v1", Args: []string{"--platform=systrap", "--overlay2=none"}}, false},
		{Runtime{Name: "runsc", Path: "/usr/bin/runsc", Args: []string{"--network=sandbox"}}, false},
		{Runtime{Name: "gvisor", Type: "io.containerd.runsc.v1", Args: []string{"--network=host"}}, true},
		// runc has no such argument: the container's own namespace is its
		// network, served by the host's kernel as every runc container.
		{Runtime{Name: "runc", Path: "runc", Args: []string{"--network=host"}}, false},
	} {
		if got := tc.rt.HostNetwork(); got != tc.want {
			t.Errorf("%+v: HostNetwork = %v, want %v", tc.rt, got, tc.want)
		}
	}
}
