package placement

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/ticketspec"
)

// PlaceholderOf reads the ticket's placeholder Pod and what it is to the
// ticket (Check.State, with the managers' key): only a Pod a
// manager signed and kube-scheduler bound is PodBound. again is how soon to
// look again at a placeholder its maker has not signed yet.
func PlaceholderOf(ctx context.Context, c client.Reader, key Key, tk *afev1.Ticket) (pod *corev1.Pod, state PodState, again time.Duration, err error) {
	pod = &corev1.Pod{}
	err = c.Get(ctx, types.NamespacedName{Namespace: tk.Namespace, Name: PodName(tk.Name)}, pod)
	switch {
	case apierrors.IsNotFound(err):
		return nil, PodAbsent, 0, nil
	case err != nil:
		return nil, PodAbsent, 0, err
	}
	check := Check{Key: key, Ticket: tk, Requests: Requests(ticketspec.Sandboxes(tk)), Now: time.Now()}
	state, again = check.State(pod)
	return pod, state, again, nil
}

// PlacedOn is the node the ticket's placeholder is bound to, empty when it
// has no placeholder a manager signed and kube-scheduler bound.
func PlacedOn(ctx context.Context, c client.Reader, key Key, tk *afev1.Ticket) (string, error) {
	pod, state, _, err := PlaceholderOf(ctx, c, key, tk)
	if err != nil || state != PodBound {
		return "", err
	}
	return pod.Spec.NodeName, nil
}

// SandboxHere is the per-node gate (--per-node) of a Sandbox and of the
// Runs in it: here is true when the Sandbox belongs on this manager's node,
// its Ticket's placeholder Pod being bound here; ticketed is false for a
// Sandbox of no Ticket (never placed). A Sandbox being deleted whose ticket
// has no placeholder any more is finished by the node the ticket reports.
// Each kind's gate is its reconciler's here method.
func SandboxHere(ctx context.Context, c client.Reader, instance string, key Key, sbx *afev1.Sandbox) (here, ticketed bool, err error) {
	tk, ticketed, err := TicketOf(ctx, c, sbx)
	if err != nil || !ticketed {
		return false, ticketed, err
	}
	if tk == nil {
		// Its Ticket is gone: any manager finishes its deletion (each
		// removes its own objects; another node's sweep removes what it
		// ran once the Sandbox is gone).
		return !sbx.DeletionTimestamp.IsZero(), true, nil
	}
	node, err := PlacedOn(ctx, c, key, tk)
	switch {
	case err != nil:
		return false, true, err
	case node != "":
		return node == instance, true, nil
	}
	return !sbx.DeletionTimestamp.IsZero() && tk.Status.Node == instance, true, nil
}

// PlacedNode is the node the placeholder Pod of the Sandbox's Ticket is
// bound to: empty when the Sandbox has no Ticket, or its Pod is not bound.
func PlacedNode(ctx context.Context, c client.Reader, key Key, sbx *afev1.Sandbox) (string, error) {
	tk, _, err := TicketOf(ctx, c, sbx)
	if err != nil || tk == nil {
		return "", err
	}
	return PlacedOn(ctx, c, key, tk)
}

// TicketOf is the Ticket the Sandbox's controller reference names, of that
// UID; ticketed is false for a Sandbox of no Ticket, and the Ticket nil
// when it is gone.
func TicketOf(ctx context.Context, c client.Reader, sbx *afev1.Sandbox) (tk *afev1.Ticket, ticketed bool, err error) {
	ref := metav1.GetControllerOf(sbx)
	if ref == nil || ref.Kind != "Ticket" || ref.APIVersion != afev1.GroupVersion.String() {
		return nil, false, nil
	}
	tk = &afev1.Ticket{}
	err = c.Get(ctx, types.NamespacedName{Namespace: sbx.Namespace, Name: ref.Name}, tk)
	if client.IgnoreNotFound(err) != nil {
		return nil, true, err
	}
	if err != nil || tk.UID != ref.UID {
		return nil, true, nil
	}
	return tk, true, nil
}
