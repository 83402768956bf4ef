package placement

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

func TestCheckState(t *testing.T) {
	key, other := Key("0123456789abcdef0123456789abcdef"), Key("fedcba9876543210fedcba9876543210")
	tk := &afev1.Ticket{ObjectMeta: metav1.ObjectMeta{Name: "tx", Namespace: "ns", UID: "ticket-uid"}}
	now := time.Date(2026, 12, 7, 6, 0, 0, 0, time.UTC)
	sbx := []afev1.Sandbox{sandbox("500m", "64Mi", false)}
	check := Check{Key: key, Ticket: tk, Requests: Requests(sbx), Now: now}

	// made is the placeholder as a manager makes it: gated, not bound,
	// created age ago, with the API server's UID.
	made := func(age time.Duration) *corev1.Pod {
		p := Pod(tk, sbx, "afe/controller:dev")
		p.UID = "pod-uid"
		p.CreationTimestamp = metav1.NewTime(now.Add(-age))
		p.Spec.SchedulerName = corev1.DefaultSchedulerName
		return p
	}
	signed := func(p *corev1.Pod, k Key) *corev1.Pod {
		k.Seal(p, tk.UID)
		return p
	}
	bound := func(p *corev1.Pod) *corev1.Pod {
		p.Spec.NodeName = "node-1"
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
		return p
	}
	edit := func(p *corev1.Pod, f func(*corev1.Pod)) *corev1.Pod { f(p); return p }
	// forged is a tenant's Pod of the placeholder's name, bound by hand,
	// requesting nothing, with a controller reference to the Ticket.
	forged := func() *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: PodName(tk.Name), Namespace: tk.Namespace, UID: "tenant-pod",
			CreationTimestamp: metav1.NewTime(now.Add(-time.Second)),
			OwnerReferences:   []metav1.OwnerReference{*metav1.NewControllerRef(tk, afev1.GroupVersion.WithKind("Ticket"))}}}
		p.Spec.NodeName, p.Spec.SchedulerName = "node-3", corev1.DefaultSchedulerName
		p.Spec.Containers = []corev1.Container{{Name: "c", Image: "x"}}
		return p
	}

	tests := map[string]struct {
		pod   *corev1.Pod
		want  PodState
		again time.Duration
	}{
		"none":                      {nil, PodAbsent, 0},
		"not the ticket's":          {edit(forged(), func(p *corev1.Pod) { p.OwnerReferences = nil }), PodForeign, 0},
		"made, not signed yet":      {made(time.Second), PodUnbound, UnsignedGrace - time.Second},
		"made, its maker gone":      {made(UnsignedGrace), PodUnproven, 0},
		"made in the future (skew)": {made(-time.Hour), PodUnbound, UnsignedGrace},
		"signed, waiting":           {signed(made(time.Second), key), PodUnbound, 0},
		"signed, bound":             {bound(signed(made(time.Hour), key)), PodBound, 0},
		"forged controller reference, bound by hand": {forged(), PodUnproven, 0},
		"forged, scheduled by the kubelet's word": {edit(forged(), func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
		}), PodUnproven, 0},
		"forged, gated and bound: the gate buys no time": {edit(forged(), func(p *corev1.Pod) {
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: ProofGate}}
		}), PodUnproven, 0},
		"forged, gated and unbound: waited for, places nothing": {edit(forged(), func(p *corev1.Pod) {
			p.Spec.NodeName = ""
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: ProofGate}}
		}), PodUnbound, UnsignedGrace - time.Second},
		"a signature copied from the ticket's own Pod": {edit(forged(), func(p *corev1.Pod) {
			p.Annotations = map[string]string{ProofAnnotation: key.Sign(made(0), tk.UID)}
		}), PodUnproven, 0},
		"signed by another key":              {bound(signed(made(time.Hour), other)), PodUnproven, 0},
		"no key verifies nothing":            {bound(signed(made(time.Hour), Key{})), PodUnproven, 0},
		"signed for another ticket":          {edit(bound(made(time.Hour)), func(p *corev1.Pod) { p.Annotations = map[string]string{ProofAnnotation: key.Sign(p, "other")} }), PodUnproven, 0},
		"signed, bound without PodScheduled": {edit(bound(signed(made(time.Hour), key)), func(p *corev1.Pod) { p.Status.Conditions = nil }), PodUnproven, 0},
		"signed, of another scheduler":       {edit(bound(signed(made(time.Hour), key)), func(p *corev1.Pod) { p.Spec.SchedulerName = "mine" }), PodUnproven, 0},
		"signed, resized below the ticket's": {edit(bound(signed(made(time.Hour), key)), func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("100m")
		}), PodUnproven, 0},
		"signed, ended (its capacity freed)": {edit(bound(signed(made(time.Hour), key)), func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }), PodUnproven, 0},
		"signed, requesting more than the ticket's": {edit(bound(signed(made(time.Hour), key)), func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse("1Gi")
		}), PodBound, 0},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, again := check.State(tt.pod)
			if got != tt.want || again != tt.again {
				t.Fatalf("State = %v, %v; want %v, %v", got, again, tt.want, tt.again)
			}
		})
	}
}

func TestSignBindsTheUIDs(t *testing.T) {
	key := Key("0123456789abcdef0123456789abcdef")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "afe-placement-t", Namespace: "ns", UID: "a"}}
	sig := key.Sign(pod, "t")
	for name, p := range map[string]*corev1.Pod{
		"another Pod UID":   {ObjectMeta: metav1.ObjectMeta{Name: "afe-placement-t", Namespace: "ns", UID: "b"}},
		"another namespace": {ObjectMeta: metav1.ObjectMeta{Name: "afe-placement-t", Namespace: "ns2", UID: "a"}},
		"another name":      {ObjectMeta: metav1.ObjectMeta{Name: "afe-placement-u", Namespace: "ns", UID: "a"}},
	} {
		if key.Sign(p, "t") == sig {
			t.Errorf("%s: same signature", name)
		}
	}
	if key.Sign(pod, types.UID("u")) == sig {
		t.Error("another ticket UID: same signature")
	}
}
