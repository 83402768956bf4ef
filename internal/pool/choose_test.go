package pool

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/enginespec"
	"afe.dev/sandbox/internal/naming"
	"afe.dev/sandbox/internal/sandboxspec"
)

var t0 = time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)

// sandboxID is the identity of the sandbox the tests choose for.
var sandboxID = sandboxspec.Identity{Namespace: "team", Name: "tk-1", UID: "sbx-uid", Ticket: "tk-1",
	Scope: "main", Instance: "default", Key: naming.Key("team", "tk-1")}

func testPool(name string, created time.Time, tpl afev1.SandboxTemplateSpec) Pool {
	return Pool{Name: name, UID: name + "-uid", Created: created, Shape: shapeOf(tpl)}
}

// member is a ready member of pool p, made at created, as the pool
// controller labels it.
func member(p Pool, id string, created time.Time) Member {
	return Member{Created: created, Container: enginespec.Container{
		ID:      "c-" + id,
		Name:    naming.Member(naming.Key(sandboxID.Namespace, p.Name), id),
		Running: true,
		Labels: map[string]string{
			afev1.LabelNamespace: sandboxID.Namespace, afev1.LabelController: sandboxID.Instance,
			afev1.LabelPool: p.Name, afev1.LabelPoolUID: p.UID, afev1.LabelRole: afev1.RoleMember,
			afev1.LabelSpecHash: p.Shape.Hash(), afev1.LabelUser: "200001:200001",
		},
	}}
}

func withLabel(m Member, k, v string) Member {
	l := map[string]string{}
	for a, b := range m.Labels {
		l[a] = b
	}
	if v == "" {
		delete(l, k)
	} else {
		l[k] = v
	}
	m.Labels = l
	return m
}

func TestChoose(t *testing.T) {
	tpl := template()
	other := template()
	other.Image = "afe/other:dev"
	p := testPool("p", t0, tpl)
	q := testPool("q", t0.Add(time.Minute), tpl)
	o := testPool("o", t0, other)
	deleting := p
	deleting.Deleting = true
	m1 := member(p, "1111111111", t0.Add(2*time.Second))
	m2 := member(p, "2222222222", t0.Add(time.Second))
	mq := member(q, "3333333333", t0)
	mo := member(o, "4444444444", t0)
	claimed := m2
	claimed.Name = naming.Container(naming.Key("team", "tk-0"))
	exited := m2
	exited.Running = false
	earlierPool := withLabel(m2, afev1.LabelPoolUID, "p-uid-0")

	named := func(name string) afev1.SandboxTemplateSpec {
		s := template()
		s.PoolRef = &afev1.PoolReference{Name: name}
		return s
	}
	folder := named("p")
	folder.Workspace = afev1.WorkspaceSpec{Type: afev1.WorkspaceFolder, HostPath: "/srv/ws/team/x"}
	snapshot := named("p")
	snapshot.Workspace.FromSnapshot = "afe-team.x_snap-1"
	unnamedFolder := template()
	unnamedFolder.Workspace = afev1.WorkspaceSpec{Type: afev1.WorkspaceFolder, HostPath: "/srv/ws/team/x"}
	otherShape := named("o")

	type want struct {
		result Result
		pool   string
		member string
		reason string
	}
	tests := map[string]struct {
		spec     afev1.SandboxTemplateSpec
		pools    []Pool
		members  []Member
		claiming map[string]bool
		want     want
	}{
		"named, the oldest ready member": {named("p"), []Pool{p, q}, []Member{m1, m2, mq}, nil, want{Warm, "p", m2.ID, ""}},
		"named, only that pool's":        {named("q"), []Pool{p, q}, []Member{m1, m2, mq}, nil, want{Warm, "q", mq.ID, ""}},
		"named, no ready member":         {named("p"), []Pool{p}, nil, nil, want{ColdEmpty, "p", "", "pool p has no ready member"}},
		"named, missing":                 {named("x"), []Pool{p}, []Member{m1}, nil, want{ColdMismatch, "x", "", "pool x does not exist"}},
		"named, being deleted":           {named("p"), []Pool{deleting}, []Member{m1}, nil, want{ColdMismatch, "p", "", "pool p is being deleted"}},
		"named, another shape": {otherShape, []Pool{o}, []Member{mo}, nil,
			want{ColdMismatch, "o", "", "pool o's template shapes another container: image differs"}},
		"named, Folder workspace": {folder, []Pool{p}, []Member{m1}, nil, want{ColdMismatch, "p", "", "a Folder workspace is never pooled"}},
		"named, workspace from a snapshot": {snapshot, []Pool{p}, []Member{m1}, nil,
			want{ColdMismatch, "p", "", "a workspace from a snapshot is never pooled"}},
		"unnamed, the oldest member of any pool of the shape": {template(), []Pool{p, q, o}, []Member{m1, m2, mq, mo}, nil, want{Warm, "q", mq.ID, ""}},
		"unnamed, none of the shape":                          {template(), []Pool{o}, []Member{mo}, nil, want{Cold, "", "", ""}},
		"unnamed, no pool":                                    {template(), nil, nil, nil, want{Cold, "", "", ""}},
		"unnamed, empty pools: counted against the oldest":    {template(), []Pool{q, p}, nil, nil, want{ColdEmpty, "p", "", "pool p has no ready member"}},
		"unnamed, a deleting pool gives none":                 {template(), []Pool{deleting}, []Member{m1}, nil, want{Cold, "", "", ""}},
		"unnamed, Folder workspace":                           {unnamedFolder, []Pool{p}, []Member{m1}, nil, want{Cold, "", "", ""}},
		"claimed member (bears a Sandbox's name)":             {named("p"), []Pool{p}, []Member{claimed}, nil, want{ColdEmpty, "p", "", "pool p has no ready member"}},
		"exited member":                                       {named("p"), []Pool{p}, []Member{exited, m1}, nil, want{Warm, "p", m1.ID, ""}},
		"member another claim in flight names":                {named("p"), []Pool{p}, []Member{m2, m1}, map[string]bool{m2.ID: true}, want{Warm, "p", m1.ID, ""}},
		"member of an earlier pool of the name":               {named("p"), []Pool{p}, []Member{earlierPool}, nil, want{ColdEmpty, "p", "", "pool p has no ready member"}},
		"member of another namespace": {named("p"), []Pool{p}, []Member{withLabel(m2, afev1.LabelNamespace, "other")}, nil,
			want{ColdEmpty, "p", "", "pool p has no ready member"}},
		"member of another instance": {named("p"), []Pool{p}, []Member{withLabel(m2, afev1.LabelController, "node-2")}, nil,
			want{ColdEmpty, "p", "", "pool p has no ready member"}},
		"member of another pool's name": {named("p"), []Pool{p}, []Member{withLabel(m2, afev1.LabelPool, "q")}, nil,
			want{ColdEmpty, "p", "", "pool p has no ready member"}},
		"member labelled for a Sandbox": {named("p"), []Pool{p}, []Member{withLabel(m2, afev1.LabelSandboxUID, "x")}, nil,
			want{ColdEmpty, "p", "", "pool p has no ready member"}},
		"a sandbox container, not a member": {named("p"), []Pool{p}, []Member{withLabel(m2, afev1.LabelRole, afev1.RoleSandbox)}, nil,
			want{ColdEmpty, "p", "", "pool p has no ready member"}},
		"member of an earlier template": {named("p"), []Pool{p}, []Member{withLabel(m2, afev1.LabelSpecHash, "old")}, nil,
			want{ColdEmpty, "p", "", "pool p has no ready member"}},
		"member without an allocated user": {named("p"), []Pool{p}, []Member{withLabel(m2, afev1.LabelUser, "")}, nil,
			want{ColdEmpty, "p", "", "pool p has no ready member"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			spec := tc.spec
			req := Request{ID: sandboxID, Spec: &spec, Shape: shapeOf(spec), Claiming: tc.claiming}
			c := Choose(req, tc.pools, tc.members)
			got := want{c.Result, c.Pool, "", c.Reason}
			if c.Member != nil {
				got.member = c.Member.ID
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Fatalf("Choose (-want +got):\n%s", diff)
			}
			if c.Result == Warm && c.PoolUID != c.Pool+"-uid" {
				t.Fatalf("PoolUID %q", c.PoolUID)
			}
		})
	}
}

// A template that names a user takes members without an allocated one.
func TestChooseNamedUser(t *testing.T) {
	tpl := template()
	tpl.User = "1000:1000"
	p := testPool("p", t0, tpl)
	m := withLabel(member(p, "1111111111", t0), afev1.LabelUser, "")
	c := Choose(Request{ID: sandboxID, Spec: &tpl, Shape: shapeOf(tpl)}, []Pool{p}, []Member{m})
	if c.Result != Warm || c.Member.ID != m.ID {
		t.Fatalf("Choose = %+v", c)
	}
}
