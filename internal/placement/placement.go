// Package placement places tickets on nodes in per-node mode: each Ticket
// gets one placeholder Pod, requesting what its sandboxes and proxies may
// use, which kube-scheduler binds to a node; the manager of that node (its
// --instance) then creates the ticket's sandboxes on its own engine.
//
// A placeholder's binding is trusted only on a Pod the Ticket controls (its
// controller reference names the Ticket's UID) that a manager signed, and
// that kube-scheduler bound (proof.go): a Pod of the same name made by
// anyone else places nothing, whatever its owner references. Ticket.status.node is a report; it decides
// only which manager finishes what a lost placement left.
package placement

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/naming"
)

// PlaceholderLabel marks placeholder Pods (value "true"): the managers watch
// only the Pods that carry it.
const PlaceholderLabel = "sandbox.afe.dev/placeholder"

// maxName is the longest Pod name (a DNS subdomain).
const maxName = 253

// PodName is the name of the ticket's placeholder Pod: fixed, so that
// managers racing to create it make one. A name too long for the prefix is
// cut and ends in a hash of the whole.
func PodName(ticket string) string {
	n := "afe-placement-" + ticket
	if len(n) <= maxName {
		return n
	}
	return n[:maxName-17] + "-" + naming.Hash(ticket)
}

// ProxyResources is what an egress proxy may use (its container's limits).
var ProxyResources = corev1.ResourceList{
	corev1.ResourceCPU:    resource.MustParse("500m"),
	corev1.ResourceMemory: resource.MustParse("256Mi"),
}

// Requests is what the sandboxes may use together, each with its proxy if
// it has egress: their limits, so that a node is never promised more than
// it has.
func Requests(sandboxes []afev1.Sandbox) corev1.ResourceList {
	cpu, mem := resource.Quantity{}, resource.Quantity{}
	for i := range sandboxes {
		r := sandboxes[i].Spec.Resources
		cpu.Add(r.CPUOrDefault())
		mem.Add(r.MemoryOrDefault())
		if len(sandboxes[i].Spec.Egress) > 0 {
			cpu.Add(ProxyResources[corev1.ResourceCPU])
			mem.Add(ProxyResources[corev1.ResourceMemory])
		}
	}
	return corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourceMemory: mem}
}

// Pod is the ticket's placeholder: the project's own image pausing, with
// the ticket's placement and the requests of its sandboxes, controlled by
// the Ticket. It runs as a restricted Pod (non-root, no capability, no
// service account token), so that any Pod Security level admits it.
func Pod(tk *afev1.Ticket, sandboxes []afev1.Sandbox, image string) *corev1.Pod {
	requests := Requests(sandboxes)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      PodName(tk.Name),
			Namespace: tk.Namespace,
			Labels: map[string]string{
				PlaceholderLabel:     "true",
				afev1.TicketUIDLabel: string(tk.UID),
			},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(tk, afev1.GroupVersion.WithKind("Ticket"))},
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:      "placeholder",
				Image:     image,
				Command:   []string{"/manager", "pause"},
				Resources: corev1.ResourceRequirements{Requests: requests},
				SecurityContext: &corev1.SecurityContext{
					RunAsNonRoot:             ptr.To(true),
					RunAsUser:                ptr.To[int64](65532),
					AllowPrivilegeEscalation: ptr.To(false),
					ReadOnlyRootFilesystem:   ptr.To(true),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
					SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
				},
			}},
			// kube-scheduler leaves it until its maker signs it (Key.Seal).
			SchedulingGates:               []corev1.PodSchedulingGate{{Name: ProofGate}},
			AutomountServiceAccountToken:  ptr.To(false),
			EnableServiceLinks:            ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](0),
		},
	}
	if p := tk.Spec.Placement; p != nil {
		pod.Spec.NodeSelector = p.NodeSelector
		pod.Spec.Affinity = p.Affinity
		pod.Spec.Tolerations = p.Tolerations
		pod.Spec.PriorityClassName = p.PriorityClassName
	}
	return pod
}

// ControlledBy is true when the Pod is the ticket's placeholder: its
// controller reference names the Ticket's UID.
func ControlledBy(pod *corev1.Pod, tk *afev1.Ticket) bool {
	ref := metav1.GetControllerOf(pod)
	return ref != nil && ref.UID == tk.UID && ref.Kind == "Ticket" && ref.APIVersion == afev1.GroupVersion.String()
}

// Unschedulable is the scheduler's message on a Pod it could not place yet,
// and false while it has not tried (a Pod still gated, or just signed,
// says SchedulingGated: not the scheduler's word).
func Unschedulable(pod *corev1.Pod) (string, bool) {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason != corev1.PodReasonSchedulingGated {
			return c.Message, true
		}
	}
	return "", false
}
