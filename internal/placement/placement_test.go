package placement

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

func sandbox(cpu, mem string, egress bool) afev1.Sandbox {
	s := afev1.Sandbox{}
	c, m := resource.MustParse(cpu), resource.MustParse(mem)
	s.Spec.Resources.CPU, s.Spec.Resources.Memory = &c, &m
	if egress {
		s.Spec.Egress = []afev1.EgressHost{"example.com"}
	}
	return s
}

func TestRequests(t *testing.T) {
	tests := []struct {
		name      string
		sandboxes []afev1.Sandbox
		cpu, mem  string
	}{
		{"one sandbox", []afev1.Sandbox{sandbox("500m", "128Mi", false)}, "500m", "128Mi"},
		{"a proxy per sandbox with egress", []afev1.Sandbox{sandbox("500m", "128Mi", true), sandbox("1", "1Gi", false)}, "2", "1408Mi"},
		{"defaults", []afev1.Sandbox{{}}, "1", "1Gi"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Requests(tt.sandboxes)
			if c := got[corev1.ResourceCPU]; c.Cmp(resource.MustParse(tt.cpu)) != 0 {
				t.Errorf("cpu = %s, want %s", c.String(), tt.cpu)
			}
			if m := got[corev1.ResourceMemory]; m.Cmp(resource.MustParse(tt.mem)) != 0 {
				t.Errorf("memory = %s, want %s", m.String(), tt.mem)
			}
		})
	}
}

func TestPod(t *testing.T) {
	tk := &afev1.Ticket{ObjectMeta: metav1.ObjectMeta{Name: "t1", Namespace: "ns", UID: types.UID("u-1")}}
	tk.Spec.Placement = &afev1.TicketPlacement{
		NodeSelector:      map[string]string{"zone": "a"},
		Tolerations:       []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}},
		PriorityClassName: "high",
	}
	pod := Pod(tk, []afev1.Sandbox{sandbox("500m", "128Mi", false)}, "afe/controller:dev")
	if pod.Name != "afe-placement-t1" || pod.Namespace != "ns" {
		t.Fatalf("pod %s/%s", pod.Namespace, pod.Name)
	}
	if !ControlledBy(pod, tk) {
		t.Fatal("the placeholder is not controlled by its ticket")
	}
	other := tk.DeepCopy()
	other.UID = "u-2"
	if ControlledBy(pod, other) {
		t.Fatal("a ticket of the same name and another UID controls the placeholder")
	}
	if pod.Spec.NodeSelector["zone"] != "a" || len(pod.Spec.Tolerations) != 1 || pod.Spec.PriorityClassName != "high" {
		t.Fatalf("placement not carried: %+v", pod.Spec)
	}
	c := pod.Spec.Containers[0]
	if cpu := c.Resources.Requests[corev1.ResourceCPU]; cpu.Cmp(resource.MustParse("500m")) != 0 {
		t.Fatalf("cpu request %s", cpu.String())
	}
	if sc := c.SecurityContext; sc == nil || !*sc.RunAsNonRoot || *sc.AllowPrivilegeEscalation || len(sc.Capabilities.Drop) != 1 {
		t.Fatalf("placeholder not restricted: %+v", sc)
	}
	if *pod.Spec.AutomountServiceAccountToken {
		t.Fatal("the placeholder mounts a service account token")
	}
}

func TestPodName(t *testing.T) {
	long := strings.Repeat("a", 253)
	for _, n := range []string{"t", long, long[:240]} {
		name := PodName(n)
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			t.Errorf("PodName(%d characters) = %q: %v", len(n), name, errs)
		}
	}
	if PodName(long) == PodName(long[:252]+"b") {
		t.Error("two long names give one Pod name")
	}
}

func TestUnschedulable(t *testing.T) {
	pod := &corev1.Pod{}
	if _, ok := Unschedulable(pod); ok {
		t.Fatal("a Pod the scheduler has not looked at is unschedulable")
	}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonSchedulingGated,
		Message: "Scheduling is blocked due to non-empty scheduling gates"}}
	if _, ok := Unschedulable(pod); ok {
		t.Fatal("a Pod gated until it is signed is unschedulable")
	}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Message: "0/3 nodes are available: 3 Insufficient cpu."}}
	if msg, ok := Unschedulable(pod); !ok || !strings.Contains(msg, "Insufficient cpu") {
		t.Fatalf("Unschedulable = %q, %v", msg, ok)
	}
}
