package sandboxspec

import (
	"slices"
	"strings"
	"testing"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/enginespec"
)

func TestParseRuntimes(t *testing.T) {
	tests := map[string]struct {
		list, def string
		want      []string
		wantDef   string
		wantErr   string
	}{
		"defaults":             {want: []string{"runc"}, wantDef: "runc"},
		"both":                 {list: "runc,runsc", want: []string{"runc", "runsc"}, wantDef: "runc"},
		"runsc the default":    {list: "runsc, runc", def: "runsc", want: []string{"runsc", "runc"}, wantDef: "runsc"},
		"repeated":             {list: "runc,runc,", want: []string{"runc"}, wantDef: "runc"},
		"runsc only":           {list: "runsc", def: "runsc", want: []string{"runsc"}, wantDef: "runsc"},
		"default not listed":   {list: "runsc", wantErr: "not on --runtimes"},
		"other default":        {list: "runc", def: "kata", wantErr: "not on --runtimes"},
		"not a name":           {list: "runc,Run SC", wantErr: "not a runtime name"},
		"a path is not a name": {list: "/usr/bin/runsc", wantErr: "not a runtime name"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, def, err := ParseRuntimes(tc.list, tc.def)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) || def != tc.wantDef {
				t.Fatalf("got %v %q %v, want %v %q", got, def, err, tc.want, tc.wantDef)
			}
		})
	}
}

func TestValidateRuntime(t *testing.T) {
	both := Options{Runtimes: []string{"runc", "runsc"}, DefaultRuntime: "runc"}
	gvisorOnly := Options{Runtimes: []string{"runsc"}, DefaultRuntime: "runsc"}
	tests := map[string]struct {
		runtime    string
		opts       Options
		wantReason string
		wantOf     string
	}{
		"unset: the default":             {opts: both, wantOf: "runc"},
		"unset, no flags: runc":          {wantOf: "runc"},
		"runsc allowed":                  {runtime: "runsc", opts: both, wantOf: "runsc"},
		"runsc without --runtimes":       {runtime: "runsc", wantReason: afev1.RuntimeNotAllowedReason, wantOf: "runsc"},
		"runc when only runsc is":        {runtime: "runc", opts: gvisorOnly, wantReason: afev1.RuntimeNotAllowedReason, wantOf: "runc"},
		"unset when only runsc is":       {opts: gvisorOnly, wantOf: "runsc"},
		"a name the CRD would refuse":    {runtime: "../runsc", opts: both, wantReason: afev1.InvalidSpecReason, wantOf: "../runsc"},
		"upper case the CRD would fail":  {runtime: "RUNSC", opts: both, wantReason: afev1.InvalidSpecReason, wantOf: "RUNSC"},
		"another engine's runtime named": {runtime: "kata", opts: both, wantReason: afev1.RuntimeNotAllowedReason, wantOf: "kata"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			spec := validSpec()
			spec.Runtime = tc.runtime
			if of := RuntimeOf(&spec, tc.opts); of != tc.wantOf {
				t.Fatalf("RuntimeOf = %q, want %q", of, tc.wantOf)
			}
			err := Validate(&spec, tc.opts)
			ie, _ := AsInvalid(err)
			switch {
			case tc.wantReason == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.wantReason != "" && (ie == nil || ie.Reason != tc.wantReason):
				t.Fatalf("error %v, want reason %s", err, tc.wantReason)
			}
		})
	}
}

func TestRuntimeAllowed(t *testing.T) {
	opts := Options{Runtimes: []string{"runsc"}, DefaultRuntime: "runsc"}
	for rt, want := range map[string]bool{"runsc": true, "runc": false, "": false} {
		if got := RuntimeAllowed(rt, opts); got != want {
			t.Errorf("RuntimeAllowed(%q) = %v, want %v", rt, got, want)
		}
	}
	if !RuntimeAllowed("", Options{}) {
		t.Error("a container of the engine's default is allowed by the default --runtimes")
	}
}

// Under a user-space kernel the declared process limit is kept inside it
// (RLIMIT_NPROC), and the host's pids limit only bounds the kernel's cost;
// under runc the spec is the host's limit, as before.
func TestContainerUnderAUserSpaceKernel(t *testing.T) {
	sbx := testSandbox()
	sbx.Spec.Resources.Pids = 64
	id := IdentityOf(sbx, "default")
	runc := Container(sbx, id, Resolved{Workspace: "v", Runtime: enginespec.Runtime{Name: "runc", Path: "runc"}})
	if runc.Runtime != "runc" || runc.PidsLimit != 64 || hasUlimit(runc, "nproc") {
		t.Fatalf("runc: runtime %q, pids %d, ulimits %v", runc.Runtime, runc.PidsLimit, runc.Ulimits)
	}
	gvisor := Container(sbx, id, Resolved{Workspace: "v", Runtime: enginespec.Runtime{Name: "gvisor", Path: "/usr/bin/runsc"}})
	if gvisor.Runtime != "gvisor" {
		t.Fatalf("runtime %q", gvisor.Runtime)
	}
	if want := hostPidsLimit(64); gvisor.PidsLimit != want || want != hostTasksMax {
		t.Fatalf("host pids limit %d, want %d", gvisor.PidsLimit, want)
	}
	if gvisor.MemoryBytes != runc.MemoryBytes+kernelMemoryOverhead {
		t.Fatalf("memory %d, want runc's %d and gVisor's kernel's", gvisor.MemoryBytes, runc.MemoryBytes)
	}
	i := slices.IndexFunc(gvisor.Ulimits, func(u enginespec.Ulimit) bool { return u.Name == "nproc" })
	if i < 0 || gvisor.Ulimits[i].Soft != 64 || gvisor.Ulimits[i].Hard != 64 {
		t.Fatalf("ulimits %v: want nproc 64:64", gvisor.Ulimits)
	}
	if gvisor.Labels[afev1.LabelSpecHash] == runc.Labels[afev1.LabelSpecHash] {
		t.Fatal("the runtime is not in the spec hash")
	}
}

func TestUserSpaceKernel(t *testing.T) {
	for _, tc := range []struct {
		rt   enginespec.Runtime
		want bool
	}{
		{enginespec.Runtime{Name: "runc", Path: "runc"}, false},
		{enginespec.Runtime{Name: "runsc", Path: "/usr/bin/runsc"}, true},
		{enginespec.Runtime{Name: "gvisor", Path: "/opt/gvisor/runsc"}, true},
		{enginespec.Runtime{Name: "gvisor-shim", Type: "io.containerd.runsc.v1"}, true},
		{enginespec.Runtime{Name: "kata", Type: "io.containerd.kata.v2"}, false},
		{enginespec.Runtime{Name: "crun", Path: "/usr/bin/crun"}, false},
		{enginespec.Runtime{Name: "runsc-lookalike", Path: "/usr/local/bin/runc"}, false},
	} {
		if got := tc.rt.UserSpaceKernel(); got != tc.want {
			t.Errorf("%+v: UserSpaceKernel = %v, want %v", tc.rt, got, tc.want)
		}
	}
}

func hasUlimit(c enginespec.ContainerSpec, name string) bool {
	return slices.ContainsFunc(c.Ulimits, func(u enginespec.Ulimit) bool { return u.Name == name })
}

// The proxy runs under runc whatever the sandbox's runtime: squid resolves
// the allowed names with the engine's DNS, which gVisor's network stack
// does not reach. A proxy made before runtimes were chosen keeps its hash.
// Its fixed address, when it has one, is where the sandbox's /etc/hosts
// finds it.
func TestProxyRunsUnderRunc(t *testing.T) {
	sbx := testSandbox()
	id := IdentityOf(sbx, "default")
	p := Proxy(sbx, id, ProxyOptions{Image: "p", EgressNetwork: "e"}, Allowlist{})
	if p.Runtime != DefaultRuntime || p.PidsLimit != 128 || hasUlimit(p, "nproc") {
		t.Fatalf("proxy: runtime %q, pids %d, ulimits %v; want runc's", p.Runtime, p.PidsLimit, p.Ulimits)
	}
	unnamed := p
	unnamed.Runtime = ""
	if Hash(unnamed) != p.Labels[afev1.LabelSpecHash] {
		t.Fatal("runc named changed the hash of a proxy made before runtimes were chosen")
	}
	fixed := Proxy(sbx, id, ProxyOptions{Image: "p", EgressNetwork: "e", Address: "198.18.0.10"}, Allowlist{})
	if fixed.IPv4Address != "198.18.0.10" || fixed.Labels[afev1.LabelSpecHash] == p.Labels[afev1.LabelSpecHash] {
		t.Fatalf("a fixed address: %q, hash %s (the engine's choice: %s)", fixed.IPv4Address, fixed.Labels[afev1.LabelSpecHash], p.Labels[afev1.LabelSpecHash])
	}
}

func TestProxyAddress(t *testing.T) {
	for subnet, want := range map[string]string{
		"198.18.0.8/29": "198.18.0.10", "198.18.0.13/29": "198.18.0.10", "10.0.0.0/24": "10.0.0.2",
		"10.0.0.0/30": "", "fd00::/64": "", "x": "",
	} {
		if got := ProxyAddress(subnet); got != want {
			t.Errorf("ProxyAddress(%q) = %q, want %q", subnet, got, want)
		}
	}
	// The sandbox's address is fixed beside the proxy's: the engine, which
	// may attach the sandbox first, never gives it the proxy's.
	for proxy, want := range map[string]string{"198.18.0.10": "198.18.0.11", "": "", "fd00::2": "", "x": ""} {
		if got := SandboxAddress(proxy); got != want {
			t.Errorf("SandboxAddress(%q) = %q, want %q", proxy, got, want)
		}
	}
	c := Container(testSandbox(), IdentityOf(testSandbox(), "default"), Resolved{Workspace: "w", Network: "n", ProxyAddress: "198.18.0.10", Address: "198.18.0.11"})
	if c.IPv4Address != "198.18.0.11" {
		t.Errorf("the sandbox's container: IPv4Address %q, want its fixed address", c.IPv4Address)
	}
}

func TestHostPidsLimit(t *testing.T) {
	for pids, want := range map[int64]int64{16: 2048, 32: 3072, 48: 4096, 512: hostTasksMax, 65536: hostTasksMax} {
		if got := hostPidsLimit(pids); got != want {
			t.Errorf("hostPidsLimit(%d) = %d, want %d", pids, got, want)
		}
	}
}
