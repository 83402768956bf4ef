package loops

import (
	"context"
	"sort"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// retainedSnapshot is true for a snapshot volume whose ticket keeps it: the
// Ticket it was made under still exists, is not being deleted, and is
// either not finished yet or says retainSnapshots. Such a volume outlives
// its sandbox (a scope dropped, a sandbox deleted by hand and made again);
// the sweep leaves it. When the ticket cannot be read, the volume is kept
// until the next sweep.
func retainedSnapshot(ctx context.Context, c client.Reader, labels map[string]string) bool {
	if labels[afev1.LabelRole] != afev1.RoleSnapshot || labels[afev1.LabelTicketUID] == "" {
		return false
	}
	tk := &afev1.Ticket{}
	err := c.Get(ctx, types.NamespacedName{Namespace: labels[afev1.LabelNamespace], Name: labels[afev1.LabelTicket]}, tk)
	if err != nil {
		return !apierrors.IsNotFound(err)
	}
	return string(tk.UID) == labels[afev1.LabelTicketUID] && tk.DeletionTimestamp.IsZero() &&
		(tk.Spec.RetainSnapshots || !tk.Ended(time.Now()))
}

// retainedSnapshots lists the snapshot volumes a finished ticket keeps.
func retainedSnapshots(ctx context.Context, engine SweepEngine, tk *afev1.Ticket, instance string) ([]string, error) {
	if !tk.Spec.RetainSnapshots || !tk.DeletionTimestamp.IsZero() {
		return nil, nil
	}
	vols, err := engine.ListVolumes(ctx, map[string]string{
		afev1.LabelController: instance,
		afev1.LabelNamespace:  tk.Namespace,
		afev1.LabelTicketUID:  string(tk.UID),
		afev1.LabelRole:       afev1.RoleSnapshot,
	})
	if err != nil {
		return nil, err
	}
	var names []string
	for _, v := range vols {
		names = append(names, v.Name)
	}
	sort.Strings(names)
	return names, nil
}
