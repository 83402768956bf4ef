package ticketspec

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

func TestSandboxes(t *testing.T) {
	tests := map[string]struct {
		scopes     []string
		workspace  afev1.WorkspaceType
		wantNames  []string
		wantScopes []string
	}{
		"volume, default scope":       {workspace: afev1.WorkspaceVolume, wantNames: []string{"tk"}, wantScopes: []string{"main"}},
		"volume, two scopes":          {scopes: []string{"a", "b"}, workspace: afev1.WorkspaceVolume, wantNames: []string{"tk"}, wantScopes: []string{"a"}},
		"folder, two scopes":          {scopes: []string{"a", "b"}, workspace: afev1.WorkspaceFolder, wantNames: []string{"tk-a", "tk-b"}, wantScopes: []string{"a", "b"}},
		"folder, one scope":           {scopes: []string{"main"}, workspace: afev1.WorkspaceFolder, wantNames: []string{"tk-main"}, wantScopes: []string{"main"}},
		"unset workspace is a volume": {scopes: []string{"x", "y"}, wantNames: []string{"tk"}, wantScopes: []string{"x"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tk := &afev1.Ticket{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "tk", UID: "tk-uid"},
				Spec: afev1.TicketSpec{Scopes: tc.scopes, Sandbox: afev1.SandboxTemplateSpec{
					Image: "img", Workspace: afev1.WorkspaceSpec{Type: tc.workspace, HostPath: "/srv/x"},
				}},
			}
			var names, scopes []string
			for _, s := range Sandboxes(tk) {
				names = append(names, s.Name)
				scopes = append(scopes, s.Spec.Scope)
				if s.Spec.TicketRef.Name != "tk" || s.Labels[afev1.TicketLabel] != "tk" || !OwnedBy(&s, tk) || s.Spec.Image != "img" {
					t.Fatalf("sandbox %+v", s)
				}
			}
			if d := cmp.Diff([2][]string{tc.wantNames, tc.wantScopes}, [2][]string{names, scopes}); d != "" {
				t.Fatal(d)
			}
		})
	}
}
