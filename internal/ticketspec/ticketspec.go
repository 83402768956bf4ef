// Package ticketspec derives the Sandboxes a Ticket should have.
package ticketspec

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/naming"
)

// Sandboxes are the Sandboxes the ticket should have: one named like the
// ticket for a Volume workspace (its scope is the first scope; every scope
// shares it), or one per scope, "<ticket>-<scope>" (see SandboxName), for a
// Folder workspace. They carry the ticket's labels and a controller owner
// reference to it.
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
			n := SandboxName(tk.Name, s)
			names[n] = s
			order = append(order, n)
		}
	}
	tmpl := tk.Spec.Sandbox.DeepCopy()
	// The ticket's idle timeout is its sandboxes' unless the template sets
	// one; its deadline is the ticket's own.
	if idle := tk.Spec.Lifecycle.IdleTimeout(); idle > 0 && tmpl.Lifecycle.IdleTimeout() == 0 {
		if tmpl.Lifecycle == nil {
			tmpl.Lifecycle = &afev1.SandboxLifecycle{}
		}
		tmpl.Lifecycle.IdleTimeoutSeconds = tk.Spec.Lifecycle.IdleTimeoutSeconds
	}
	out := make([]afev1.Sandbox, 0, len(order))
	for _, name := range order {
		out = append(out, afev1.Sandbox{
			ObjectMeta: metav1.ObjectMeta{
				Namespace:       tk.Namespace,
				Name:            name,
				Labels:          labels(tk),
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(tk, afev1.GroupVersion.WithKind("Ticket"))},
				// The Sandbox controller's finalizer, set at creation: one
				// write less per sandbox than adding it after.
				Finalizers: []string{afev1.SandboxFinalizer},
			},
			Spec: afev1.SandboxSpec{
				TicketRef:           &afev1.TicketReference{Name: tk.Name},
				Scope:               names[name],
				SandboxTemplateSpec: *tmpl.DeepCopy(),
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

// maxName is the longest name of a Kubernetes object (a DNS subdomain).
const maxName = 253

// SandboxName is the name of a Folder ticket's Sandbox for a scope:
// "<ticket>-<scope>", or, when that is longer than a name may be, the
// ticket's name cut, a hash of the whole ticket name, and the scope. Every
// ticket name (up to 253 characters) has one, distinct per ticket and scope.
func SandboxName(ticket, scope string) string {
	n := ticket + "-" + scope
	if len(n) <= maxName {
		return n
	}
	hash := naming.Hash(ticket)
	// A DNS subdomain: no "-" or "." may end the cut part before the "-".
	prefix := strings.TrimRight(ticket[:maxName-len(scope)-len(hash)-2], "-.")
	return prefix + "-" + hash + "-" + scope
}

// labels are a ticket's Sandbox's labels: the ticket's UID, and its name
// when it fits in a label value.
func labels(tk *afev1.Ticket) map[string]string {
	l := map[string]string{afev1.TicketUIDLabel: string(tk.UID)}
	if len(tk.Name) <= 63 {
		l[afev1.TicketLabel] = tk.Name
	}
	return l
}
