package ticketspec

import (
	"regexp"
	"slices"
	"strings"
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
				if s.Spec.TicketRef.Name != "tk" || s.Labels[afev1.TicketLabel] != "tk" || !OwnedBy(&s, tk) || !slices.Equal(s.Finalizers, []string{afev1.SandboxFinalizer}) || s.Spec.Image != "img" {
					t.Fatalf("sandbox %+v", s)
				}
			}
			if d := cmp.Diff([2][]string{tc.wantNames, tc.wantScopes}, [2][]string{names, scopes}); d != "" {
				t.Fatal(d)
			}
		})
	}
}

func TestSandboxNameFitsEveryTicketName(t *testing.T) {
	dns1123 := regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	long := strings.Repeat("a", 253)
	tests := map[string]struct {
		ticket, scope string
		want          string
	}{
		"short":                  {"tk", "main", "tk-main"},
		"exactly fits":           {strings.Repeat("a", 248), "main", strings.Repeat("a", 248) + "-main"},
		"longest name":           {long, "main", ""},
		"cut before a dot":       {strings.Repeat("a", 200) + "." + strings.Repeat("b", 52), "review", ""},
		"cut before a dash":      {strings.Repeat("a", 220) + "-" + strings.Repeat("b", 32), "x", ""},
		"longest name and scope": {long, strings.Repeat("s", 63), ""},
	}
	seen := map[string]string{}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := SandboxName(tc.ticket, tc.scope)
			if tc.want != "" && got != tc.want {
				t.Fatalf("SandboxName = %q, want %q", got, tc.want)
			}
			if len(got) > 253 || !dns1123.MatchString(got) {
				t.Fatalf("SandboxName = %q (%d characters) is not a valid name", got, len(got))
			}
			if !strings.HasSuffix(got, "-"+tc.scope) {
				t.Fatalf("SandboxName = %q does not end in the scope", got)
			}
			if prev, ok := seen[got]; ok && prev != tc.ticket+"/"+tc.scope {
				t.Fatalf("%q is the name of two sandboxes", got)
			}
			seen[got] = tc.ticket + "/" + tc.scope
		})
	}
	if SandboxName(long, "main") == SandboxName(long[:252]+"b", "main") {
		t.Fatal("two long ticket names share a sandbox name")
	}
}

func TestLongTicketNamesAreNotLabels(t *testing.T) {
	tk := &afev1.Ticket{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: strings.Repeat("a", 64), UID: "u1"}}
	for _, s := range Sandboxes(tk) {
		if _, ok := s.Labels[afev1.TicketLabel]; ok {
			t.Fatalf("a 64-character name is not a valid label value: %v", s.Labels)
		}
		if s.Labels[afev1.TicketUIDLabel] != "u1" {
			t.Fatalf("labels %v lack the ticket's UID", s.Labels)
		}
	}
}

func TestSandboxesLifecycle(t *testing.T) {
	lc := func(idle, deadline int64) *afev1.SandboxLifecycle {
		return &afev1.SandboxLifecycle{IdleTimeoutSeconds: idle, ActiveDeadlineSeconds: deadline}
	}
	tests := map[string]struct {
		ticket, template *afev1.SandboxLifecycle
		want             *afev1.SandboxLifecycle
	}{
		"neither":                             {},
		"template only":                       {template: lc(30, 600), want: lc(30, 600)},
		"ticket idle fills an unset template": {ticket: lc(30, 0), want: lc(30, 0)},
		"ticket idle fills a template without idle, keeping its deadline": {
			ticket: lc(30, 0), template: lc(0, 600), want: lc(30, 600)},
		"template idle wins over the ticket's":     {ticket: lc(30, 0), template: lc(90, 0), want: lc(90, 0)},
		"ticket deadline is the ticket's own":      {ticket: lc(0, 60)},
		"ticket deadline leaves the template's":    {ticket: lc(0, 60), template: lc(0, 600), want: lc(0, 600)},
		"ticket idle and deadline: only idle goes": {ticket: lc(30, 60), want: lc(30, 0)},
		"ticket zero idle leaves the template's":   {ticket: lc(0, 0), template: lc(90, 600), want: lc(90, 600)},
		"empty ticket lifecycle, empty template":   {ticket: lc(0, 0), template: lc(0, 0), want: lc(0, 0)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tk := &afev1.Ticket{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "tk", UID: "tk-uid"},
				Spec: afev1.TicketSpec{
					Scopes:    []string{"a", "b"},
					Lifecycle: tc.ticket.DeepCopy(),
					Sandbox: afev1.SandboxTemplateSpec{
						Image:     "img",
						Workspace: afev1.WorkspaceSpec{Type: afev1.WorkspaceFolder, HostPath: "/srv/x"},
						Lifecycle: tc.template.DeepCopy(),
					},
				},
			}
			got := Sandboxes(tk)
			if len(got) != 2 {
				t.Fatalf("%d sandboxes, want 2", len(got))
			}
			for _, s := range got {
				if d := cmp.Diff(tc.want, s.Spec.Lifecycle); d != "" {
					t.Errorf("sandbox %s lifecycle (-want +got):\n%s", s.Name, d)
				}
			}
			if d := cmp.Diff(tc.template, tk.Spec.Sandbox.Lifecycle); d != "" {
				t.Errorf("the ticket's template was changed (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.ticket, tk.Spec.Lifecycle); d != "" {
				t.Errorf("the ticket's lifecycle was changed (-want +got):\n%s", d)
			}
			if a, b := got[0].Spec.Lifecycle, got[1].Spec.Lifecycle; a != nil && a == b {
				t.Error("two sandboxes share one lifecycle")
			}
		})
	}
}
