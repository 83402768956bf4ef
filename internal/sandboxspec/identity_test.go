package sandboxspec

import (
	"testing"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

func TestIdentityOwnsAndStale(t *testing.T) {
	id := Identity{Namespace: "ns", Name: "x", UID: "u1", Ticket: "x", Scope: "main", Instance: "default", Key: "ns.x"}
	labels := func(edit func(map[string]string)) map[string]string {
		l := id.Labels(afev1.RoleSandbox)
		edit(l)
		return l
	}
	tests := map[string]struct {
		labels      map[string]string
		owns, stale bool
	}{
		"ours":                     {labels(func(map[string]string) {}), true, false},
		"another role":             {labels(func(l map[string]string) { l[afev1.LabelRole] = afev1.RoleProxy }), false, false},
		"another instance":         {labels(func(l map[string]string) { l[afev1.LabelController] = "other" }), false, false},
		"earlier sandbox":          {labels(func(l map[string]string) { l[afev1.LabelSandboxUID] = "u0" }), false, true},
		"earlier, other instance":  {labels(func(l map[string]string) { l[afev1.LabelSandboxUID] = "u0"; l[afev1.LabelController] = "b" }), false, false},
		"other sandbox's name":     {labels(func(l map[string]string) { l[afev1.LabelSandboxUID] = "u0"; l[afev1.LabelSandbox] = "y" }), false, false},
		"other namespace":          {labels(func(l map[string]string) { l[afev1.LabelSandboxUID] = "u0"; l[afev1.LabelNamespace] = "victim" }), false, false},
		"earlier, other role":      {labels(func(l map[string]string) { l[afev1.LabelSandboxUID] = "u0"; l[afev1.LabelRole] = afev1.RoleProxy }), false, false},
		"unlabelled":               {map[string]string{}, false, false},
		"uid label missing":        {labels(func(l map[string]string) { delete(l, afev1.LabelSandboxUID) }), false, false},
		"uid label of this object": {labels(func(l map[string]string) { l[afev1.LabelSandbox] = "y" }), true, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := id.OwnsAs(tc.labels, afev1.RoleSandbox); got != tc.owns {
				t.Errorf("OwnsAs = %v, want %v", got, tc.owns)
			}
			if got := id.Stale(tc.labels, afev1.RoleSandbox); got != tc.stale {
				t.Errorf("Stale = %v, want %v", got, tc.stale)
			}
		})
	}
}
