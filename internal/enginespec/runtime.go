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
