package placement

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// Who made a placeholder. Anyone who may create Pods in the ticket's
// namespace can make a Pod of the placeholder's name, with any controller
// reference and any spec.nodeName (bound by hand, past kube-scheduler,
// capacity and quota): its binding must place nothing. Its UID is the one
// thing of it the API server alone chooses, so the manager that makes a
// placeholder signs that UID, with the ticket's, by a key the managers
// share and the tenants cannot read (KeySecret), and the binding of a Pod
// is trusted only with a valid signature. The Pod is made with a
// scheduling gate (ProofGate), lifted by the same write that signs it:
// kube-scheduler binds a placeholder only once it is signed, so a bound
// Pod without a valid signature was never a manager's, whenever it is read.

// ProofAnnotation holds a placeholder's signature (Key.Sign).
const ProofAnnotation = "sandbox.afe.dev/placeholder-proof"

// ProofGate is the scheduling gate a placeholder is made with; its maker
// lifts it when it signs the Pod.
const ProofGate = "sandbox.afe.dev/placeholder-proof"

// UnsignedGrace is how long a gated, unsigned placeholder is waited for,
// from its creation, before it is replaced: long enough for its maker to
// sign it, short enough that one whose maker stopped before signing it is
// made again soon.
const UnsignedGrace = 30 * time.Second

// KeySize is the length of the managers' key, in bytes.
const KeySize = 32

// Key is the managers' shared secret that signs their placeholders. An
// empty Key signs nothing valid: no Pod places a ticket.
type Key []byte

// Sign is the signature of the Pod (its namespace, name and UID) as the
// placeholder of the ticket of that UID.
func (k Key) Sign(pod *corev1.Pod, ticket types.UID) string {
	m := hmac.New(sha256.New, k)
	for _, s := range []string{"afe placeholder v1", pod.Namespace, pod.Name, string(pod.UID), string(ticket)} {
		m.Write([]byte(s))
		m.Write([]byte{0})
	}
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// Seal signs the Pod, made by this manager with that UID, as the
// placeholder of the ticket of that UID, and lifts its scheduling gate.
func (k Key) Seal(pod *corev1.Pod, ticket types.UID) {
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[ProofAnnotation] = k.Sign(pod, ticket)
	gates := pod.Spec.SchedulingGates[:0:0]
	for _, g := range pod.Spec.SchedulingGates {
		if g.Name != ProofGate {
			gates = append(gates, g)
		}
	}
	pod.Spec.SchedulingGates = gates
}

// Signed is true when the Pod carries a valid signature as the placeholder
// of the ticket of that UID.
func (k Key) Signed(pod *corev1.Pod, ticket types.UID) bool {
	got, ok := pod.Annotations[ProofAnnotation]
	return len(k) > 0 && ok && hmac.Equal([]byte(got), []byte(k.Sign(pod, ticket)))
}

// Check is what a Pod of the placeholder's name is checked against before
// its binding places the ticket.
type Check struct {
	// Key verifies the signature.
	Key Key
	// Ticket is the ticket placed.
	Ticket *afev1.Ticket
	// Requests is what the ticket's sandboxes may use (Requests): a
	// placeholder requests at least that.
	Requests corev1.ResourceList
	// Now is the time of the check.
	Now time.Time
}

// State is what the Pod (nil: none) is to the ticket, and, for a gated
// placeholder not signed yet, how soon to look again: once that is past,
// it is PodUnproven. Only a Pod the ticket controls, signed by a manager,
// bound by the default scheduler (PodScheduled), requesting at least what
// the ticket's sandboxes may use and not ended is PodBound.
func (c Check) State(pod *corev1.Pod) (PodState, time.Duration) {
	switch {
	case pod == nil:
		return PodAbsent, 0
	case !ControlledBy(pod, c.Ticket):
		return PodForeign, 0
	case !c.Key.Signed(pod, c.Ticket.UID):
		left := UnsignedGrace - c.Now.Sub(pod.CreationTimestamp.Time)
		if gated(pod) && pod.Spec.NodeName == "" && left > 0 {
			return PodUnbound, min(left, UnsignedGrace)
		}
		return PodUnproven, 0
	case pod.Spec.NodeName == "":
		return PodUnbound, 0
	case !scheduled(pod) || !covers(podRequests(pod), c.Requests) || ended(pod):
		return PodUnproven, 0
	}
	return PodBound, 0
}

// gated is true for a Pod kube-scheduler leaves alone until its maker
// signs it.
func gated(pod *corev1.Pod) bool {
	for _, g := range pod.Spec.SchedulingGates {
		if g.Name == ProofGate {
			return true
		}
	}
	return false
}

// scheduled is true for a Pod of the default scheduler that the scheduler
// bound: its binding set PodScheduled.
func scheduled(pod *corev1.Pod) bool {
	if pod.Spec.SchedulerName != corev1.DefaultSchedulerName {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// ended is true for a Pod whose containers are done (Failed or Succeeded:
// an activeDeadlineSeconds its namespace's users can set, say): the
// scheduler no longer counts its requests on the node.
func ended(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded
}

// podRequests is the CPU and memory the Pod's containers request together.
func podRequests(pod *corev1.Pod) corev1.ResourceList {
	sum := corev1.ResourceList{}
	for _, ctr := range pod.Spec.Containers {
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if q, ok := ctr.Resources.Requests[name]; ok {
				total := sum[name]
				total.Add(q)
				sum[name] = total
			}
		}
	}
	return sum
}

// covers is true when have holds at least the CPU and memory of want.
func covers(have, want corev1.ResourceList) bool {
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		h, w := have[name], want[name]
		if h.Cmp(w) < 0 {
			return false
		}
	}
	return true
}
