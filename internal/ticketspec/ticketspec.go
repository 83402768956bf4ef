// Package ticketspec derives the Sandboxes a Ticket should have.
package ticketspec

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// Sandboxes are the Sandboxes the ticket should have: one named like the
// ticket for a Volume workspace (its scope is the first scope; every scope
// shares it), or one per scope, "<ticket>-<scope>", for a Folder workspace.
// They carry the ticket's label and a controller owner reference to it.
func Sandboxes(tk *afev1.Ticket) []afev1.Sandbox {
	scopes := tk.Spec.Scopes
	if len(scopes) == 0 {
		scopes = []string{"main"}
	}
	names := map[string]string{tk.Name: scopes[0]}
	order := []string{tk.Name}
	if tk.Spec.Sandbox.Workspace.Type == afev1.WorkspaceFolder {
		names, order = map[string]string{}, nil
		for _, s := range scopes {
			n := tk.Name + "-" + s
			names[n] = s
			order = append(order, n)
		}
	}
	out := make([]afev1.Sandbox, 0, len(order))
	for _, name := range order {
		out = append(out, afev1.Sandbox{
			ObjectMeta: metav1.ObjectMeta{
				Namespace:       tk.Namespace,
				Name:            name,
				Labels:          map[string]string{afev1.TicketLabel: tk.Name},
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(tk, afev1.GroupVersion.WithKind("Ticket"))},
			},
			Spec: afev1.SandboxSpec{
				TicketRef:           &afev1.TicketReference{Name: tk.Name},
				Scope:               names[name],
				SandboxTemplateSpec: *tk.Spec.Sandbox.DeepCopy(),
			},
		})
	}
	return out
}

// OwnedBy is true when the Sandbox is controlled by the ticket.
func OwnedBy(sbx *afev1.Sandbox, tk *afev1.Ticket) bool {
	ref := metav1.GetControllerOf(sbx)
	return ref != nil && ref.UID == tk.UID
}
