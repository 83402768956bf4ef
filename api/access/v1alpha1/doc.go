// Package v1alpha1 holds the wire types of the access API, the aggregated
// API the manager serves beside the sandbox.afe.dev objects (exec, files,
// Run logs, command telemetry and what sandboxes use, reached through the
// Kubernetes API server): its group and version, the telemetry record
// lists and the SandboxUsage it answers with, and the reasons a client
// acts on.
//
// A refusal of the access API is a metav1.Status whose Reason is one of
// Kubernetes' (NotFound, Conflict, Forbidden, ...) and whose Details name
// the object and carry one cause whose Type is a Reason of this package:
// clients decide on that reason (ReasonOf), never on the message, which is
// for people.
//
// This package imports nothing of the server (which links the Docker SDK):
// clients depend on it alone. Its types are answers, never stored: no CRD
// is made of them.
//
// +kubebuilder:skip
package v1alpha1
