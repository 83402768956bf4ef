package sandboxspec

import (
	"fmt"
	"slices"
	"strings"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/enginespec"
)

// DefaultRuntime is the default of --runtimes and --default-runtime: the
// host's kernel, through runc.
const DefaultRuntime = "runc"

// ParseRuntimes parses --runtimes and --default-runtime: the list of
// allowed runtime names (empty: DefaultRuntime) and the default, which must
// be on it.
func ParseRuntimes(list, def string) ([]string, string, error) {
	var out []string
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if !runtimeName.MatchString(name) || len(name) > 63 {
			return nil, "", fmt.Errorf("--runtimes: %q is not a runtime name", name)
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	if len(out) == 0 {
		out = []string{DefaultRuntime}
	}
	if def == "" {
		def = DefaultRuntime
	}
	if !slices.Contains(out, def) {
		return nil, "", fmt.Errorf("--default-runtime %q is not on --runtimes (%s)", def, strings.Join(out, ","))
	}
	return out, def, nil
}

// RuntimeOf is the runtime a sandbox runs under: spec.runtime, or else the
// controller's default.
func RuntimeOf(spec *afev1.SandboxTemplateSpec, opts Options) string {
	if spec.Runtime != "" {
		return spec.Runtime
	}
	if opts.DefaultRuntime != "" {
		return opts.DefaultRuntime
	}
	return DefaultRuntime
}

// RuntimeAllowed tells whether a container's runtime, as the engine
// reports it (empty: the engine's default, runc before runtimes were
// chosen), is on --runtimes.
func RuntimeAllowed(runtime string, opts Options) bool {
	if runtime == "" {
		runtime = DefaultRuntime
	}
	return slices.Contains(allowedRuntimes(opts), runtime)
}

// allowedRuntimes is --runtimes, or DefaultRuntime alone.
func allowedRuntimes(opts Options) []string {
	if len(opts.Runtimes) == 0 {
		return []string{DefaultRuntime}
	}
	return opts.Runtimes
}

// validateRuntime refuses a runtime that is not on --runtimes.
func validateRuntime(spec *afev1.SandboxTemplateSpec, opts Options) error {
	allowed := allowedRuntimes(opts)
	if rt := RuntimeOf(spec, opts); !slices.Contains(allowed, rt) {
		return invalid(afev1.RuntimeNotAllowedReason, "Runtime %q is not allowed by the controller (--runtimes %s)", rt, strings.Join(allowed, ","))
	}
	return nil
}

// hostTasksPerProcess is how many host tasks (threads and processes) a
// process under gVisor may cost: the stub of its address space and the
// kernel's own threads, which multiply when the sandbox's CPU is
// throttled. Measured on Debian's runsc (ptrace): about 40 idle, 8 a
// process unthrottled, 43 a process for a fork bomb of 32 at half a CPU;
// on the current build (systrap): 33 idle, about 2 a sleeping process,
// 5 a shell forking in a loop at half a CPU. The bound is kept for the
// worst seen (a program's threads cost a task each). hostTasksMax bounds a sandbox's share of the host's process
// IDs (32768 on many hosts) whatever its declared limit: past it gVisor's
// kernel cannot make a thread and the sandbox ends, its own loss, never the
// host's.
const (
	hostTasksPerProcess = 64
	hostTasksBase       = 1024
	hostTasksMax        = 4096
)

// kernelMemoryOverhead is added to the host's memory limit of a container
// under gVisor, as Kubernetes' RuntimeClass overhead is to a pod's: the
// host counts gVisor's kernel and its memory file in the container's
// cgroup (about 14 MiB idle; 4 sandboxes running 50 execs at once each
// were killed at a 128 MiB limit with 75 MiB of it gVisor's), while the
// declared limit is the workload's.
const kernelMemoryOverhead = 128 << 20

// hostPidsLimit is the host's pids limit of a sandbox under gVisor whose
// declared limit is pids.
func hostPidsLimit(pids int64) int64 {
	return min(pids*hostTasksPerProcess+hostTasksBase, hostTasksMax)
}

// applyRuntime sets the container's runtime, and what a user-space kernel
// needs to keep the limits the spec declares. Under gVisor the host's pids
// cgroup counts the kernel's own threads, not the workload's processes, and
// reaching it ends the whole sandbox: the declared limit is kept inside the
// user-space kernel (RLIMIT_NPROC of the sandbox's user, which that kernel
// counts on its own: a fork past it fails with EAGAIN), and the host's
// limit only bounds what the kernel may cost the host.
func applyRuntime(c *enginespec.ContainerSpec, rt enginespec.Runtime) {
	c.Runtime = rt.Name
	if !rt.UserSpaceKernel() {
		return
	}
	pids := c.PidsLimit
	c.PidsLimit = hostPidsLimit(pids)
	if c.MemoryBytes > 0 {
		c.MemoryBytes += kernelMemoryOverhead
	}
	c.Ulimits = append(c.Ulimits, enginespec.Ulimit{Name: "nproc", Soft: pids, Hard: pids})
}

// UsableRuntime refuses a runtime the engine has but the controller does
// not run sandboxes under: a user-space kernel that hands the workload's
// sockets to the host's kernel (Runtime.HostNetwork), the part of the
// kernel a network-facing exploit aims at.
func UsableRuntime(rt enginespec.Runtime) error {
	if rt.HostNetwork() {
		return invalid(afev1.RuntimeUnavailableReason,
			"The engine's runtime %q hands the workload's sockets to the host's kernel (%s): register it with gVisor's own network stack (make runsc, or without --network=host); retrying",
			rt.Name, strings.Join(rt.Args, " "))
	}
	return nil
}
