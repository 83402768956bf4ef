package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SandboxPoolFinalizer is set on every SandboxPool so that its unclaimed
// members are removed before it goes away.
const SandboxPoolFinalizer = "sandbox.afe.dev/pool"

// Condition types of a SandboxPool.
const (
	// SandboxPoolReadyCondition is true when the pool keeps as many ready
	// members as spec.replicas asks (bounded by the controller's
	// --max-pool-replicas) on the engine.
	SandboxPoolReadyCondition = "Ready"
)

// Condition reasons of a SandboxPool.
const (
	// PoolFillingReason: the pool has fewer ready members than it wants;
	// more are being made, at a pace that leaves room for cold creations.
	PoolFillingReason = "Filling"
	// PoolReplicasBoundedReason: spec.replicas is above the controller's
	// --max-pool-replicas; the pool keeps that many instead.
	PoolReplicasBoundedReason = "ReplicasBounded"
	// PoolMemberFailedReason: the last member could not be made (the
	// message says why); the next one is tried after a back-off.
	PoolMemberFailedReason = "MemberFailed"
)

// Reasons of the Event a Sandbox gets when it was created cold although it
// named a pool (spec.poolRef), and of the claims counted in
// afe_pool_claims_total{result}.
const (
	// PoolEmptyReason: the pool had no ready member to give.
	PoolEmptyReason = "PoolEmpty"
	// PoolMismatchReason: the pool does not exist, or its template shapes
	// another container than the sandbox's, or the sandbox's workspace is
	// never pooled (a Folder, or a volume from a snapshot).
	PoolMismatchReason = "PoolMismatch"
	// PoolDriftNotAppliedReason: the sandbox runs on a pool member and its
	// spec changed what shapes the container since the claim; the member
	// keeps its container (recreate the Sandbox to apply the change).
	PoolDriftNotAppliedReason = "DriftNotApplied"
)

// SandboxPoolSpec declares the ready members a pool keeps.
// +kubebuilder:validation:XValidation:rule="!has(self.template.workspace) || !has(self.template.workspace.type) || self.template.workspace.type == 'Volume'",message="a pool's template must have a Volume workspace: a Folder workspace is never pooled"
// +kubebuilder:validation:XValidation:rule="!has(self.template.workspace) || !has(self.template.workspace.fromSnapshot)",message="a pool's template cannot set workspace.fromSnapshot: a member's workspace starts empty"
// +kubebuilder:validation:XValidation:rule="!has(self.template.poolRef)",message="a pool's template cannot set poolRef: a member is never taken from another pool"
type SandboxPoolSpec struct {
	// template shapes the members' containers, as a Sandbox's template
	// does: image, command (and env, only with a command), user,
	// resources, runtime, lifecycle, and whether egress is declared (a
	// member with egress has its network and proxy ready, admitting
	// nothing until a claim installs the claimant's own allowlist). A
	// Sandbox takes a member when its own template shapes the very same
	// container. The workspace is a Volume.
	Template SandboxTemplateSpec `json:"template"`

	// replicas is how many ready members the pool keeps on each engine
	// (on each node in per-node mode); the controller keeps at most its
	// --max-pool-replicas. Claimed members are refilled in the background.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +optional
	Replicas int32 `json:"replicas"`
}

// SandboxPoolStatus is the observed state of a SandboxPool.
type SandboxPoolStatus struct {
	// replicas is how many members the pool has on the engine, ready or
	// being made (claimed ones no longer count); in per-node mode, on every
	// node that reported (the sum of nodes).
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// readyReplicas is how many of them are ready to be claimed.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
	// ready is readyReplicas/replicas wanted, for display only.
	// +optional
	Ready string `json:"ready,omitempty"`
	// nodes are the members each node keeps, in per-node mode (--per-node),
	// where replicas is per node: each node's manager writes its own entry.
	// For display only: nothing the controller does reads it back.
	// +listType=map
	// +listMapKey=node
	// +kubebuilder:validation:MaxItems=1000
	// +optional
	Nodes []SandboxPoolNodeStatus `json:"nodes,omitempty"`
	// claims counts the Sandboxes that took a member of this pool.
	// +optional
	Claims int64 `json:"claims,omitempty"`
	// misses counts the Sandboxes that named this pool and were created
	// cold (no ready member, or another shape).
	// +optional
	Misses int64 `json:"misses,omitempty"`
	// observedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// conditions: Ready.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// SandboxPoolNodeStatus is the members one node keeps, in per-node mode.
type SandboxPoolNodeStatus struct {
	// node is the node (the manager's --instance) whose engine keeps them.
	// +kubebuilder:validation:MaxLength=253
	Node string `json:"node"`
	// replicas is how many members the node has, ready or being made.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// readyReplicas is how many of them are ready to be claimed.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
}

// SandboxPool keeps ready sandbox containers (members) of one template, so
// that a Sandbox of that shape takes one when it is created instead of
// waiting for a container to be made.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=sbxpool,categories=afe
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.template.image`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.ready`
// +kubebuilder:printcolumn:name="Claims",type=integer,JSONPath=`.status.claims`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type SandboxPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec declares the pool.
	Spec SandboxPoolSpec `json:"spec"`
	// status is the pool's observed state.
	// +optional
	Status SandboxPoolStatus `json:"status,omitempty"`
}

// SandboxPoolList is a list of SandboxPools.
// +kubebuilder:object:root=true
type SandboxPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SandboxPool `json:"items"`
}

func init() {
	register(&SandboxPool{}, &SandboxPoolList{})
}
