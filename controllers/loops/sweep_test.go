package loops

import (
	"context"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/naming"
)

func TestNotRunning(t *testing.T) {
	ready := []metav1.Condition{{Type: afev1.SandboxReadyCondition, Status: metav1.ConditionTrue}}
	sandbox := func(uid string, egress bool, conds []metav1.Condition) afev1.Sandbox {
		s := afev1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: uid, UID: types.UID(uid)}}
		if egress {
			s.Spec.Egress = []afev1.EgressHost{"example.com"}
		}
		s.Status.Conditions = conds
		return s
	}
	ctr := func(uid, role string, running bool) docker.Container {
		return docker.Container{Running: running, Labels: map[string]string{afev1.LabelSandboxUID: uid, afev1.LabelRole: role}}
	}
	member := func(name, role string, running bool) docker.Container {
		return docker.Container{Name: name, Running: running, Labels: map[string]string{afev1.LabelPoolUID: "p", afev1.LabelRole: role}}
	}
	deleting := sandbox("d", false, ready)
	now := metav1.Now()
	deleting.DeletionTimestamp = &now

	tests := []struct {
		name       string
		sandboxes  []afev1.Sandbox
		containers []docker.Container
		want       []string
	}{
		{"running sandbox", []afev1.Sandbox{sandbox("a", false, ready)},
			[]docker.Container{ctr("a", afev1.RoleSandbox, true)}, nil},
		{"missing container", []afev1.Sandbox{sandbox("a", false, ready)}, nil, []string{"a"}},
		{"exited container", []afev1.Sandbox{sandbox("a", false, ready)},
			[]docker.Container{ctr("a", afev1.RoleSandbox, false)}, []string{"a"}},
		{"another sandbox's container", []afev1.Sandbox{sandbox("a", false, ready)},
			[]docker.Container{ctr("b", afev1.RoleSandbox, true)}, []string{"a"}},
		{"egress with proxy", []afev1.Sandbox{sandbox("a", true, ready)},
			[]docker.Container{ctr("a", afev1.RoleSandbox, true), ctr("a", afev1.RoleProxy, true)}, nil},
		{"egress without proxy", []afev1.Sandbox{sandbox("a", true, ready)},
			[]docker.Container{ctr("a", afev1.RoleSandbox, true), ctr("a", afev1.RoleProxy, false)}, []string{"a"}},
		{"claimed member with its proxy", []afev1.Sandbox{sandbox("a", true, ready)},
			[]docker.Container{member(naming.Container(naming.Key("", "a")), afev1.RoleMember, true),
				member(naming.Proxy(naming.Key("", "a")), afev1.RoleProxy, true)}, nil},
		{"claimed member whose proxy exited", []afev1.Sandbox{sandbox("a", true, ready)},
			[]docker.Container{member(naming.Container(naming.Key("", "a")), afev1.RoleMember, true),
				member(naming.Proxy(naming.Key("", "a")), afev1.RoleProxy, false)}, []string{"a"}},
		{"claimed member with another sandbox's member proxy", []afev1.Sandbox{sandbox("a", true, ready)},
			[]docker.Container{member(naming.Container(naming.Key("", "a")), afev1.RoleMember, true),
				member(naming.Proxy(naming.Key("", "b")), afev1.RoleProxy, true)}, []string{"a"}},
		{"not Ready yet: its reconcile is under way", []afev1.Sandbox{sandbox("a", false, nil)}, nil, nil},
		{"being deleted", []afev1.Sandbox{deleting}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, s := range notRunning(tt.sandboxes, tt.containers) {
				got = append(got, s.Name)
			}
			if len(got) != len(tt.want) || (len(got) > 0 && got[0] != tt.want[0]) {
				t.Errorf("notRunning = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestStatusForged(t *testing.T) {
	key := "ns.a"
	running := docker.Container{ID: "c1", Running: true, Labels: map[string]string{afev1.LabelSandboxUID: "a", afev1.LabelRole: afev1.RoleSandbox}}
	tests := map[string]struct {
		status afev1.SandboxStatus
		forged bool
	}{
		"empty":               {afev1.SandboxStatus{}, false},
		"own names":           {afev1.SandboxStatus{ContainerName: "afe-" + key, ContainerID: "c1", VolumeName: "afe-" + key + "_ws", NetworkName: "afe-" + key + "_net", ProxyName: "afe-" + key + "_proxy"}, false},
		"legacy volume":       {afev1.SandboxStatus{VolumeName: "afe-" + key + "-ws"}, false},
		"another's container": {afev1.SandboxStatus{ContainerName: "afe-victim.v"}, true},
		"another's ID":        {afev1.SandboxStatus{ContainerID: "c2"}, true},
		"another's volume":    {afev1.SandboxStatus{VolumeName: "afe-victim.v_ws"}, true},
		"another's network":   {afev1.SandboxStatus{NetworkName: "bridge"}, true},
		"another's proxy":     {afev1.SandboxStatus{ProxyName: "afe-victim.v_proxy"}, true},
		"a legacy proxy name": {afev1.SandboxStatus{ProxyName: "afe-" + key + "-proxy"}, true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			sbx := afev1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", UID: "a"}, Status: tc.status}
			got := len(statusForged([]afev1.Sandbox{sbx}, []docker.Container{running})) == 1
			if got != tc.forged {
				t.Errorf("statusForged = %v, want %v", got, tc.forged)
			}
		})
	}
}

// In per-node mode the sweep resyncs only the sandboxes placed on its own
// node: another node's Ready sandbox runs nothing on this engine.
func TestResyncOnlyHere(t *testing.T) {
	var queued []string
	s := &Sweeper{Enqueue: func(namespace, name string) { queued = append(queued, namespace+"/"+name) }}
	mine := &afev1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "mine"}}
	theirs := &afev1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "theirs"}}
	if !s.resync(context.Background())(theirs) {
		t.Fatal("without Here every sandbox is resynced")
	}
	s.Here = func(_ context.Context, sbx *afev1.Sandbox) bool { return sbx == mine }
	resync := s.resync(context.Background())
	if !resync(mine) || resync(theirs) {
		t.Fatal("Here decides which sandboxes are resynced")
	}
	if want := []string{"ns/theirs", "ns/mine"}; !slices.Equal(queued, want) {
		t.Fatalf("queued %v, want %v", queued, want)
	}
}
