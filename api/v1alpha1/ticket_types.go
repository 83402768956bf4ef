package v1alpha1

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TicketFinalizer is set on every Ticket so that its sandboxes and their
// Docker objects are removed before it goes away.
const TicketFinalizer = "sandbox.afe.dev/ticket"

// TicketLabel is set on the Sandboxes a Ticket creates, with its name, when
// the name fits in a label value (63 characters): for selecting them with
// kubectl. The controller finds a ticket's Sandboxes by their owner
// reference, never by this label.
const TicketLabel = "sandbox.afe.dev/ticket"

// TicketUIDLabel is set on the Sandboxes a Ticket creates, with its UID,
// whatever the length of its name.
const TicketUIDLabel = "sandbox.afe.dev/ticket-uid"

// TicketState is what the user wants of a ticket.
// +kubebuilder:validation:Enum=Active;Paused;Done;Failed;Cancelled
type TicketState string

// The states of a Ticket. Done, Failed and Cancelled are terminal.
const (
	TicketActive    TicketState = "Active"
	TicketPaused    TicketState = "Paused"
	TicketDone      TicketState = "Done"
	TicketFailed    TicketState = "Failed"
	TicketCancelled TicketState = "Cancelled"
)

// Terminal is true for the states a ticket never leaves.
func (s TicketState) Terminal() bool {
	return s == TicketDone || s == TicketFailed || s == TicketCancelled
}

// TicketPhase is where a ticket is in its life.
// +kubebuilder:validation:Enum=Pending;Provisioning;Ready;Paused;CleaningUp;Finished
type TicketPhase string

// The phases of a Ticket.
const (
	// TicketPending: in per-node mode, the ticket waits for kube-scheduler
	// to place it on a node.
	TicketPending      TicketPhase = "Pending"
	TicketProvisioning TicketPhase = "Provisioning"
	TicketReady        TicketPhase = "Ready"
	TicketPausedPhase  TicketPhase = "Paused"
	TicketCleaningUp   TicketPhase = "CleaningUp"
	TicketFinished     TicketPhase = "Finished"
)

// Condition types of a Ticket.
const (
	// TicketReadyCondition is true when every sandbox of the ticket is Ready.
	TicketReadyCondition = "Ready"
	// TicketRequeuedCondition is true once a sandbox of the ticket was lost
	// and recreated: the step in flight then was interrupted.
	TicketRequeuedCondition = "Requeued"
	// TicketCleanedUpCondition is true when a finished ticket has no
	// Sandbox and no Docker object left.
	TicketCleanedUpCondition = "CleanedUp"
)

// Condition reasons of a Ticket.
const (
	// PausedReason: the ticket is paused; its sandboxes are kept as they are.
	PausedReason = "Paused"
	// CleaningUpReason: the ticket's sandboxes are being removed.
	CleaningUpReason = "CleaningUp"
	// CleanedUpReason: nothing of the ticket is left.
	CleanedUpReason = "CleanedUp"
	// SandboxesSuspendedReason: every sandbox that is not Ready is
	// suspended (idle, or spec.suspend); a Run of one resumes it.
	SandboxesSuspendedReason = "SandboxesSuspended"
	// SandboxesNotReadyReason: some sandboxes are not Ready yet.
	SandboxesNotReadyReason = "SandboxesNotReady"
	// SandboxConflictReason: a Sandbox with a name the ticket needs belongs
	// to something else.
	SandboxConflictReason = "SandboxConflict"
	// TicketFailedCondition is true when the ticket ended Failed by the
	// controller's decision (reason DeadlineExceeded), whatever its
	// spec.state says.
	TicketFailedCondition = "Failed"
	// NoLossReason: no sandbox of the ticket was lost.
	NoLossReason = "NoLoss"
	// SchedulingReason: in per-node mode, the ticket's placeholder Pod
	// waits for kube-scheduler to look at it.
	SchedulingReason = "Scheduling"
	// UnschedulableReason: in per-node mode, kube-scheduler has not placed
	// the ticket's placeholder Pod; the message is the scheduler's.
	UnschedulableReason = "Unschedulable"
	// PlacementConflictReason: a Pod with the name of the ticket's
	// placeholder exists and is not the ticket's.
	PlacementConflictReason = "PlacementConflict"
	// NodeLostReason: the node the ticket was placed on went NotReady or
	// away, or its placeholder Pod was deleted: the ticket's sandboxes are
	// created afresh where it is placed next.
	NodeLostReason = "NodeLost"
	// NodeDrainedReason: the ticket's placeholder Pod was evicted or
	// deleted (kubectl drain) while its node's manager runs: the ticket is
	// moved with its workspace to where kube-scheduler places it next.
	NodeDrainedReason = "NodeDrained"
)

// TicketPlacement constrains, in per-node mode, the nodes a ticket's
// sandboxes may run on; kube-scheduler places the ticket's placeholder Pod
// with these fields as they would be on any Pod.
type TicketPlacement struct {
	// nodeSelector: the node's labels must match these.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// affinity: node affinity and (anti-)affinity to other Pods, placeholder
	// Pods of other tickets included.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`
	// tolerations of the nodes' taints.
	// +listType=atomic
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// priorityClassName: the placeholder Pod's priority (and preemption) class.
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`
}

// TicketSpec declares a unit of work and its sandboxes.
// +kubebuilder:validation:XValidation:rule="!(oldSelf.state in ['Done', 'Failed', 'Cancelled']) || self.state == oldSelf.state",message="a Done, Failed or Cancelled ticket cannot change state"
type TicketSpec struct {
	// state: Active (default), Paused (sandboxes kept as they are), or the
	// terminal Done, Failed, Cancelled (everything of the ticket removed).
	// +kubebuilder:default=Active
	// +optional
	State TicketState `json:"state,omitempty"`

	// scopes are the lanes of work of the ticket. A Volume workspace gives one
	// sandbox shared by every scope; a Folder workspace one per scope.
	// +kubebuilder:default={main}
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +listType=set
	// +optional
	Scopes []string `json:"scopes,omitempty"`

	// sandbox is the template of the ticket's sandboxes.
	Sandbox SandboxTemplateSpec `json:"sandbox"`

	// retainSnapshots keeps the snapshot volumes of the ticket's sandboxes
	// (made by Snapshot Runs) when the ticket finishes, for as long as the
	// Ticket object exists; status.retainedSnapshots lists them. Deleting
	// the Ticket, or setting this back to false, removes them. By default
	// they are removed with everything else of the ticket.
	// +kubebuilder:default=false
	// +optional
	RetainSnapshots bool `json:"retainSnapshots,omitempty"`

	// lifecycle: activeDeadlineSeconds ends the ticket, counted from its
	// creation, as Failed with reason DeadlineExceeded (cleaned up as any
	// finished ticket); idleTimeoutSeconds suspends its idle sandboxes
	// unless the sandbox template sets its own.
	// +optional
	Lifecycle *SandboxLifecycle `json:"lifecycle,omitempty"`

	// ttlSecondsAfterFinished deletes the Ticket that long after it
	// finished (its cleanup done); unset: the controller's --finished-ttl
	// (0 there keeps it). 0 here deletes it at once.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=31622400
	// +optional
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`

	// placement: in per-node mode (config/per-node), where kube-scheduler
	// may place the ticket. Ignored otherwise.
	// +optional
	Placement *TicketPlacement `json:"placement,omitempty"`
}

// TicketStatus is the observed state of a Ticket.
type TicketStatus struct {
	// phase summarises the ticket's state.
	// +optional
	Phase TicketPhase `json:"phase,omitempty"`
	// sandboxes is how many sandboxes the ticket has.
	// +optional
	Sandboxes int32 `json:"sandboxes,omitempty"`
	// readySandboxes is how many of them are Ready.
	// +optional
	ReadySandboxes int32 `json:"readySandboxes,omitempty"`
	// ready is readySandboxes/sandboxes, for display.
	// +optional
	Ready string `json:"ready,omitempty"`
	// requeues counts sandbox and node losses: each interrupted the step in
	// flight.
	// +optional
	Requeues int32 `json:"requeues,omitempty"`
	// moves counts the times the ticket was moved to another node with its
	// workspace (per-node mode, reason NodeDrained).
	// +optional
	Moves int32 `json:"moves,omitempty"`
	// lastRequeueTime is when a sandbox was last lost.
	// +optional
	LastRequeueTime *metav1.Time `json:"lastRequeueTime,omitempty"`
	// lastRequeueReason is why (SandboxLost, NodeLost).
	// +optional
	LastRequeueReason string `json:"lastRequeueReason,omitempty"`
	// observedRecreations is the sum of the sandboxes' recreations already
	// counted in requeues.
	// +optional
	ObservedRecreations int32 `json:"observedRecreations,omitempty"`
	// retainedSnapshots are the snapshot volumes a finished ticket kept
	// (retainSnapshots).
	// +listType=set
	// +optional
	RetainedSnapshots []string `json:"retainedSnapshots,omitempty"`
	// finishedTime is when cleanup of a finished ticket completed.
	// +optional
	FinishedTime *metav1.Time `json:"finishedTime,omitempty"`
	// observedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// node is, in per-node mode, the node the ticket's sandboxes run on, as
	// its manager last reported it.
	// +optional
	Node string `json:"node,omitempty"`
	// conditions: Ready, Requeued, CleanedUp.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Ticket is a unit of work: the lifecycle owner of its sandboxes.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=tk,categories=afe
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.spec.state`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.ready`
// +kubebuilder:printcolumn:name="Requeues",type=integer,JSONPath=`.status.requeues`
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.status.node`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Ticket struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec declares the ticket.
	Spec TicketSpec `json:"spec"`
	// status is the ticket's observed state.
	// +optional
	Status TicketStatus `json:"status,omitempty"`
}

// TicketList is a list of Tickets.
// +kubebuilder:object:root=true
type TicketList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Ticket `json:"items"`
}

func init() {
	register(&Ticket{}, &TicketList{})
}

// DeadlineExceeded is true once the ticket exists for longer than
// spec.lifecycle.activeDeadlineSeconds (from its creation, a time the API
// server sets); the ticket then ends Failed whatever its state.
func (tk *Ticket) DeadlineExceeded(now time.Time) bool {
	d := tk.Spec.Lifecycle.ActiveDeadline()
	return d > 0 && !now.Before(tk.CreationTimestamp.Add(d))
}

// DeadlineLeft is how long the ticket has until its deadline; zero when it
// has none or it passed.
func (tk *Ticket) DeadlineLeft(now time.Time) time.Duration {
	d := tk.Spec.Lifecycle.ActiveDeadline()
	if d <= 0 {
		return 0
	}
	return max(0, tk.CreationTimestamp.Add(d).Sub(now))
}

// Ended is true for a ticket in a terminal state or past its deadline:
// everything of it is removed.
func (tk *Ticket) Ended(now time.Time) bool {
	return tk.Spec.State.Terminal() || tk.DeadlineExceeded(now)
}
