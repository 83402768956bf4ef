package enginespec

import (
	"path"
	"strings"
)

// Runtime is an OCI runtime the engine has, as its daemon.json declares it.
type Runtime struct {
	Name string
	// Path is the runtime's binary (a runc-compatible runtime), or empty.
	Path string
	// Args are the arguments the engine gives it (runtimeArgs).
	Args []string
	// Type is a containerd shim's name (runtimeType), or empty.
	Type string
}

// UserSpaceKernel is true for gVisor (runsc): the container's processes
// run on a kernel in user space, not as processes of the host.
func (r Runtime) UserSpaceKernel() bool {
	return strings.Contains(path.Base(r.Path), "runsc") || strings.Contains(r.Type, "runsc")
}

// HostNetwork is true for a user-space kernel whose arguments hand the
// workload's sockets to the host's kernel (gVisor's --network=host: every
// socket call served by the host's network stack, in the container's
// namespace) instead of its own network stack.
func (r Runtime) HostNetwork() bool {
	if !r.UserSpaceKernel() {
		return false
	}
	for i, a := range r.Args {
		a = "--" + strings.TrimLeft(a, "-")
		if a == "--network=host" || (a == "--network" && i+1 < len(r.Args) && r.Args[i+1] == "host") {
			return true
		}
	}
	return false
}
