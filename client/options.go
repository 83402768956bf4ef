package client

import (
	"k8s.io/apimachinery/pkg/api/resource"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// A SandboxOption shapes the sandbox of a Ticket or a Sandbox.
type SandboxOption func(*afev1.SandboxTemplateSpec)

// Image is the sandbox's container image (required).
func Image(image string) SandboxOption {
	return func(s *afev1.SandboxTemplateSpec) { s.Image = image }
}

// Egress lets the sandbox reach these hosts through its proxy
// (".example.com": the domain and its subdomains).
func Egress(hosts ...string) SandboxOption {
	return func(s *afev1.SandboxTemplateSpec) {
		for _, h := range hosts {
			s.Egress = append(s.Egress, afev1.EgressHost(h))
		}
	}
}

// Env gives the variable to each command executed in the sandbox.
func Env(name, value string) SandboxOption {
	return func(s *afev1.SandboxTemplateSpec) { s.Env = append(s.Env, afev1.EnvVar{Name: name, Value: value}) }
}

// User is the numeric uid:gid the sandbox runs as (unset: one of the
// controller's own).
func User(user string) SandboxOption {
	return func(s *afev1.SandboxTemplateSpec) { s.User = user }
}

// Runtime is the OCI runtime of the sandbox ("runc", "runsc").
func Runtime(name string) SandboxOption {
	return func(s *afev1.SandboxTemplateSpec) { s.Runtime = name }
}

// DefaultTimeout is the default timeout of Runs in the sandbox, in
// seconds.
func DefaultTimeout(seconds int32) SandboxOption {
	return func(s *afev1.SandboxTemplateSpec) { s.TimeoutSeconds = seconds }
}

// MemoryBytes is the sandbox's memory limit (swap off).
func MemoryBytes(n int64) SandboxOption {
	return func(s *afev1.SandboxTemplateSpec) { s.Resources.Memory = resource.NewQuantity(n, resource.BinarySI) }
}

// CPUMillis is the sandbox's CPU limit, in thousandths of a CPU.
func CPUMillis(n int64) SandboxOption {
	return func(s *afev1.SandboxTemplateSpec) { s.Resources.CPU = resource.NewMilliQuantity(n, resource.DecimalSI) }
}

// Pids is the sandbox's limit of processes.
func Pids(n int64) SandboxOption {
	return func(s *afev1.SandboxTemplateSpec) { s.Resources.Pids = n }
}

// FromSnapshot starts the sandbox's workspace as a copy of a snapshot
// (the name Snapshot returned).
func FromSnapshot(snapshot string) SandboxOption {
	return func(s *afev1.SandboxTemplateSpec) { s.Workspace.FromSnapshot = snapshot }
}

// Template applies edit to the spec, for any field the options above do
// not cover.
func Template(edit func(*afev1.SandboxTemplateSpec)) SandboxOption {
	return SandboxOption(edit)
}

func templateOf(opts []SandboxOption) afev1.SandboxTemplateSpec {
	var s afev1.SandboxTemplateSpec
	for _, o := range opts {
		o(&s)
	}
	return s
}
