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
