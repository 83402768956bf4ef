package sandboxspec

import (
	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/enginespec"
	"afe.dev/sandbox/internal/naming"
)

const (
	// sandboxLogFile is the size of each of the two files the engine keeps
	// of a sandbox container's output: nothing of the controller reads
	// them, an operator does (`docker logs` shows why a container exited).
	sandboxLogFile = 512 << 10
	// proxyLogFile is the size of each of the two files of the proxy's:
	// one line per decision, which the egress audit reads.
	proxyLogFile = 2 << 20
	// minLogFile is the smallest log file of a sandbox with a small
	// resources.disk.
	minLogFile = 64 << 10
)

// logFor bounds a container's log: two files of size each, smaller for a
// sandbox with resources.disk (a 32nd of it, from 2 MiB on), whose bound
// counts against it (LogReserve).
func logFor(size int64, r afev1.SandboxResources) *enginespec.LogConfig {
	if r.Disk != nil {
		size = min(size, max(minLogFile, r.Disk.Value()/32))
	}
	return &enginespec.LogConfig{MaxFileBytes: size, Files: 2}
}

// SandboxLog is what the engine keeps of the sandbox container's output.
func SandboxLog(r afev1.SandboxResources) *enginespec.LogConfig {
	return logFor(sandboxLogFile, r)
}

// ProxyLog is what the engine keeps of the proxy's output.
func ProxyLog(r afev1.SandboxResources) *enginespec.LogConfig {
	return logFor(proxyLogFile, r)
}

// LogReserve is the most the engine keeps of the logs of the sandbox and
// of its proxy: counted against resources.disk with the volumes, whatever
// they hold, since the workload decides what it writes to them.
func LogReserve(sbx *afev1.Sandbox) int64 {
	r := sbx.Spec.Resources
	n := SandboxLog(r).Bound()
	if len(sbx.Spec.Egress) > 0 {
		n += ProxyLog(r).Bound()
	}
	return n
}

// imageVolumes names the volumes of the image's VOLUME paths after the
// sandbox, labelled as its own.
func imageVolumes(id Identity) *enginespec.ImageVolumes {
	return &enginespec.ImageVolumes{
		Name:   func(path string) string { return naming.ImageVolume(id.Key, path) },
		Labels: id.Labels(afev1.RoleImageVolume),
	}
}
