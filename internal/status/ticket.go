package status

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// SummarizeTicket sets the counts, the Ready condition and the phase of an
// Active or Paused ticket from its sandboxes. conflict, when set, is the
// Ready condition to report instead.
func SummarizeTicket(st *afev1.TicketStatus, generation int64, state afev1.TicketState, sandboxes []afev1.Sandbox, desired int32, conflict *metav1.Condition) {
	var ready, suspended int32
	for i := range sandboxes {
		if meta.IsStatusConditionTrue(sandboxes[i].Status.Conditions, afev1.SandboxReadyCondition) {
			ready++
		} else if sandboxes[i].Status.Phase == afev1.SandboxSuspended {
			suspended++
		}
	}
	st.Sandboxes, st.ReadySandboxes = desired, ready
	st.Ready = fmt.Sprintf("%d/%d", ready, desired)
	c := metav1.Condition{Type: afev1.TicketReadyCondition, ObservedGeneration: generation}
	switch {
	case conflict != nil:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, conflict.Reason, conflict.Message
	case state == afev1.TicketPaused:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, afev1.PausedReason, "The ticket is paused; its sandboxes are kept as they are"
	case ready == desired && desired > 0:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, afev1.ReadyReason, "Every sandbox of the ticket is Ready"
	case suspended > 0 && ready+suspended == desired:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, afev1.SandboxesSuspendedReason,
			fmt.Sprintf("%d of %d sandboxes are suspended; a Run of one resumes it", suspended, desired)
	default:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, afev1.SandboxesNotReadyReason, fmt.Sprintf("%d of %d sandboxes are Ready", ready, desired)
	}
	meta.SetStatusCondition(&st.Conditions, c)
	meta.RemoveStatusCondition(&st.Conditions, afev1.TicketCleanedUpCondition)
	st.FinishedTime = nil
	switch {
	case state == afev1.TicketPaused:
		st.Phase = afev1.TicketPausedPhase
	case c.Status == metav1.ConditionTrue:
		st.Phase = afev1.TicketReady
	default:
		st.Phase = afev1.TicketProvisioning
	}
}

// SummarizeTicketCleanup reports a finished ticket's cleanup: remaining
// sandboxes, or Finished when none is left.
func SummarizeTicketCleanup(st *afev1.TicketStatus, generation int64, remaining int, now metav1.Time) {
	st.ReadySandboxes = 0
	st.Sandboxes = int32(remaining)
	st.Ready = fmt.Sprintf("0/%d", remaining)
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: afev1.TicketReadyCondition, Status: metav1.ConditionFalse, Reason: afev1.CleaningUpReason,
		Message: "The ticket is finished", ObservedGeneration: generation,
	})
	if remaining > 0 {
		st.Phase = afev1.TicketCleaningUp
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: afev1.TicketCleanedUpCondition, Status: metav1.ConditionFalse, Reason: afev1.CleaningUpReason,
			Message: fmt.Sprintf("Removing %d sandboxes and their Docker objects", remaining), ObservedGeneration: generation,
		})
		return
	}
	st.Phase = afev1.TicketFinished
	if st.FinishedTime == nil {
		st.FinishedTime = &now
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: afev1.TicketCleanedUpCondition, Status: metav1.ConditionTrue, Reason: afev1.CleanedUpReason,
		Message: "Every sandbox and Docker object of the ticket was removed", ObservedGeneration: generation,
	})
}
