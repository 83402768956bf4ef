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
		"ours":                    {labels(func(map[string]string) {}), true, false},
		"another role":            {labels(func(l map[string]string) { l[afev1.LabelRole] = afev1.RoleProxy }), false, false},
		"another instance":        {labels(func(l map[string]string) { l[afev1.LabelController] = "other" }), false, false},
		"earlier sandbox":         {labels(func(l map[string]string) { l[afev1.LabelSandboxUID] = "u0" }), false, true},
		"earlier, other instance": {labels(func(l map[string]string) { l[afev1.LabelSandboxUID] = "u0"; l[afev1.LabelController] = "b" }), false, false},
		"other sandbox's name":    {labels(func(l map[string]string) { l[afev1.LabelSandboxUID] = "u0"; l[afev1.LabelSandbox] = "y" }), false, false},
		"other namespace":         {labels(func(l map[string]string) { l[afev1.LabelSandboxUID] = "u0"; l[afev1.LabelNamespace] = "victim" }), false, false},
		"earlier, other role":     {labels(func(l map[string]string) { l[afev1.LabelSandboxUID] = "u0"; l[afev1.LabelRole] = afev1.RoleProxy }), false, false},
		"unlabelled":              {map[string]string{}, false, false},
		"uid label missing":       {labels(func(l map[string]string) { delete(l, afev1.LabelSandboxUID) }), false, false},
		"this uid, another name":  {labels(func(l map[string]string) { l[afev1.LabelSandbox] = "y" }), false, false},
		"this uid, another ns":    {labels(func(l map[string]string) { l[afev1.LabelNamespace] = "victim" }), false, false},
		"namespace label missing": {labels(func(l map[string]string) { delete(l, afev1.LabelNamespace) }), false, false},
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

// Differs names the label that differs, in a fixed order, so that a
// refusal can say it.
func TestIdentityDiffers(t *testing.T) {
	id := Identity{Namespace: "ns", Name: "x", UID: "u1", Ticket: "x", Scope: "main", Instance: "default", Key: "ns.x"}
	edit := func(k, v string) map[string]string {
		l := id.Labels(afev1.RoleSandbox)
		l[k] = v
		return l
	}
	tests := map[string]struct {
		labels map[string]string
		role   string
		want   string
	}{
		"ours":               {labels: id.Labels(afev1.RoleSandbox), role: afev1.RoleSandbox},
		"ours, any role":     {labels: id.Labels(afev1.RoleProxy)},
		"another role":       {labels: id.Labels(afev1.RoleProxy), role: afev1.RoleSandbox, want: afev1.LabelRole},
		"another uid":        {labels: edit(afev1.LabelSandboxUID, "u2"), role: afev1.RoleSandbox, want: afev1.LabelSandboxUID},
		"another namespace":  {labels: edit(afev1.LabelNamespace, "other"), want: afev1.LabelNamespace},
		"another name":       {labels: edit(afev1.LabelSandbox, "y"), want: afev1.LabelSandbox},
		"another instance":   {labels: edit(afev1.LabelController, "b"), want: afev1.LabelController},
		"scope is no matter": {labels: edit(afev1.LabelScope, "other"), role: afev1.RoleSandbox},
		"unlabelled":         {labels: nil, want: afev1.LabelSandboxUID},
		"empty identity":     {labels: map[string]string{afev1.LabelSandboxUID: ""}, want: afev1.LabelSandboxUID},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := id.Differs(tc.labels, tc.role); got != tc.want {
				t.Errorf("Differs() = %q, want %q", got, tc.want)
			}
		})
	}
}
