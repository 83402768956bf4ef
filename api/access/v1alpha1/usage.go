package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ResourceSandboxUsages is the resource of what sandboxes use, as
// metrics.k8s.io's pods is of what Pods use: a SandboxUsage per measured
// sandbox, read from the manager's memory, never written into an object.
//
//	GET .../namespaces/NS/sandboxusages/NAME  (get sandboxusages: a SandboxUsage)
//	GET .../namespaces/NS/sandboxusages       (list sandboxusages: a SandboxUsageList)
//	GET .../sandboxusages                     (list sandboxusages in every namespace)
//
// A list takes ?labelSelector= (the Sandboxes' labels as last measured).
const ResourceSandboxUsages = "sandboxusages"

// The kinds of the answers of sandboxusages.
const (
	SandboxUsageKind     = "SandboxUsage"
	SandboxUsageListKind = "SandboxUsageList"
)

// ParamLabelSelector selects, in a list of sandboxusages, the sandboxes
// whose labels match (the syntax of kubectl's -l).
const ParamLabelSelector = "labelSelector"

// SandboxUsage is what one sandbox uses, as the manager that runs it last
// measured it (every --usage-period): the figures of its container and
// its workspace, which only the controller writes. Its metadata are the
// Sandbox's namespace, name, UID and labels at that measurement (its
// creationTimestamp is the measurement's, as a PodMetrics' is): a Sandbox
// deleted and made again under the same name has another UID, and none of
// the old one's figures.
type SandboxUsage struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	// Ticket is the Sandbox's spec.ticketRef: empty without one.
	Ticket string `json:"ticket,omitempty"`
	// Timestamp is when the figures were measured; Window how often they
	// are (the manager's --usage-period), as a PodMetrics' timestamp and
	// window.
	Timestamp metav1.Time     `json:"timestamp"`
	Window    metav1.Duration `json:"window"`
	Usage     Usage           `json:"usage"`
}

// Usage is the figures of a sandbox. CPU time and network bytes count from
// the start of the current sandbox container: a recreated container starts
// again from zero.
type Usage struct {
	// CPUMilliseconds is the CPU time of the container's processes.
	CPUMilliseconds int64 `json:"cpuMilliseconds"`
	// MemoryBytes is the container's working set (memory in use less the
	// page cache the kernel may reclaim).
	MemoryBytes int64 `json:"memoryBytes"`
	// DiskBytes is WritableLayerBytes plus WorkspaceBytes.
	DiskBytes int64 `json:"diskBytes"`
	// WritableLayerBytes is the size of the container's writable layer.
	WritableLayerBytes int64 `json:"writableLayerBytes"`
	// WorkspaceBytes is the size of the workspace volume (zero for a
	// Folder workspace, which the engine does not measure).
	WorkspaceBytes int64 `json:"workspaceBytes"`
	// NetworkReceiveBytes are the bytes received on the container's
	// interfaces (zero without egress).
	NetworkReceiveBytes int64 `json:"networkReceiveBytes"`
	// NetworkTransmitBytes are the bytes sent from the container's
	// interfaces (zero without egress).
	NetworkTransmitBytes int64 `json:"networkTransmitBytes"`
	// EgressBytes are the bytes of the requests through the egress proxy,
	// both ways, as its decisions recorded in the telemetry say (the
	// records the retention keeps).
	EgressBytes int64 `json:"egressBytes,omitempty"`
	// EgressDenials are the requests the egress proxy denied, as recorded.
	EgressDenials int64 `json:"egressDenials,omitempty"`
}

// SandboxUsageList is the answer to a list of sandboxusages: an item per
// measured sandbox, in the order of namespace and name. A Sandbox not
// measured yet (its container not running, or started since the last
// measurement) has none.
type SandboxUsageList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`
	Items           []SandboxUsage `json:"items"`
	// Unanswered names, in per-node mode, the nodes whose manager did not
	// answer: their sandboxes are missing from Items.
	Unanswered []UnansweredNode `json:"unanswered,omitempty"`
}
