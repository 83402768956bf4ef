package pool

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/enginespec"
	"afe.dev/sandbox/internal/naming"
	"afe.dev/sandbox/internal/sandboxspec"
)

type sandboxIdentity = sandboxspec.Identity

func TestNextClaimStep(t *testing.T) {
	p := testPool("p", t0, template())
	m := member(p, "1111111111", t0)
	chosen := &Choice{Result: Warm, Pool: p.Name, PoolUID: p.UID, Member: &m}
	record := RecordLabels(sandboxID, *chosen)
	ours := naming.Container(sandboxID.Key)

	// The member as the engine shows it after each step.
	waiting := func() *enginespec.Container { c := m.Container; return &c }
	renamed := func(name string) *enginespec.Container { c := m.Container; c.Name = name; return &c }
	exited := func(c *enginespec.Container) *enginespec.Container { c.Running = false; return c }
	relabelled := func(c *enginespec.Container, k, v string) *enginespec.Container {
		c.Labels = withLabel(Member{Container: *c}, k, v).Labels
		return c
	}
	recordWith := func(k, v string) map[string]string {
		l := withLabel(Member{Container: enginespec.Container{Labels: record}}, k, v).Labels
		return l
	}
	earlier := recordWith(afev1.LabelSandboxUID, "sbx-uid-0")
	coldOwn := &enginespec.Container{ID: "cold", Name: ours, Running: true, Labels: sandboxID.Labels(afev1.RoleSandbox)}
	otherTenant := renamed(ours) // a member claimed for an earlier Sandbox of this name

	tests := map[string]struct {
		view ClaimView
		want ClaimAction
	}{
		// Before the claim.
		"nothing yet":                  {ClaimView{}, ClaimChoose},
		"a member chosen":              {ClaimView{Chosen: chosen}, ClaimWriteRecord},
		"cold chosen":                  {ClaimView{Chosen: &Choice{Result: ColdEmpty}}, ClaimChoose},
		"a cold sandbox's container":   {ClaimView{Named: coldOwn, Chosen: chosen}, ClaimNone},
		"a member with no record":      {ClaimView{Named: otherTenant}, ClaimRemoveOrphan},
		"another instance's member":    {ClaimView{Named: relabelled(renamed(ours), afev1.LabelController, "node-2")}, ClaimNone},
		"another namespace's member":   {ClaimView{Named: relabelled(renamed(ours), afev1.LabelNamespace, "other")}, ClaimNone},
		"the record of another tenant": {ClaimView{Record: recordWith(afev1.LabelController, "node-2")}, ClaimConflict},
		"a record for another Sandbox name": {ClaimView{Record: recordWith(afev1.LabelSandbox, "tk-2")},
			ClaimConflict},
		"a record in another role": {ClaimView{Record: recordWith(afev1.LabelRole, afev1.RoleWorkspace)}, ClaimConflict},

		// Crash after the record was written.
		"record written, member waiting":             {ClaimView{Record: record, Member: waiting()}, ClaimRename},
		"record written, member exited":              {ClaimView{Record: record, Member: exited(waiting())}, ClaimDropRecord},
		"record written, member gone":                {ClaimView{Record: record}, ClaimDropRecord},
		"record written, member claimed by another":  {ClaimView{Record: record, Member: renamed(naming.Container(naming.Key("team", "tk-2")))}, ClaimDropRecord},
		"record written, member renamed by hand":     {ClaimView{Record: record, Member: renamed("mine")}, ClaimDropRecord},
		"record written, the sandbox's name taken":   {ClaimView{Record: record, Member: waiting(), Named: coldOwn}, ClaimDropRecord},
		"record written, member of an earlier pool":  {ClaimView{Record: record, Member: relabelled(waiting(), afev1.LabelPoolUID, "p-uid-0")}, ClaimDropRecord},
		"record written, member of another instance": {ClaimView{Record: record, Member: relabelled(waiting(), afev1.LabelController, "node-2")}, ClaimDropRecord},
		"record written, a Sandbox's container":      {ClaimView{Record: record, Member: relabelled(waiting(), afev1.LabelRole, afev1.RoleSandbox)}, ClaimDropRecord},
		"record names another container ID": {ClaimView{Record: recordWith(afev1.LabelMember, "c-other"), Member: waiting()},
			ClaimDropRecord},
		"record without a pool": {ClaimView{Record: recordWith(afev1.LabelPoolUID, ""), Member: relabelled(waiting(), afev1.LabelPoolUID, "")},
			ClaimDropRecord},

		// Crash after the rename.
		"renamed":                      {ClaimView{Record: record, Member: renamed(ours), Named: renamed(ours)}, ClaimBound},
		"renamed, then exited":         {ClaimView{Record: record, Member: exited(renamed(ours)), Named: exited(renamed(ours))}, ClaimRelease},
		"renamed, then removed":        {ClaimView{Record: record}, ClaimDropRecord},
		"renamed, labels do not match": {ClaimView{Record: record, Member: relabelled(renamed(ours), afev1.LabelPool, "q")}, ClaimDropRecord},

		// A record of an earlier Sandbox of this name.
		"stale record, its member bears the name": {ClaimView{Record: earlier, Member: renamed(ours), Named: renamed(ours)}, ClaimRelease},
		"stale record, nothing left":              {ClaimView{Record: earlier}, ClaimRelease},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			v := tc.view
			v.Sandbox = sandboxID
			got := NextClaimStep(v)
			if diff := cmp.Diff(tc.want, got.Action); diff != "" {
				t.Fatalf("NextClaimStep (-want +got):\n%s\nreason: %s", diff, got.Reason)
			}
			if (got.Reason == "") != (got.Action == ClaimChoose || got.Action == ClaimWriteRecord ||
				got.Action == ClaimRename || got.Action == ClaimBound || got.Action == ClaimNone) {
				t.Fatalf("%s with reason %q", got.Action, got.Reason)
			}
		})
	}
}

// fakeClaims is the part of an engine a claim touches: containers by ID
// and volumes' labels by name.
type fakeClaims struct {
	containers map[string]*enginespec.Container
	volumes    map[string]map[string]string
}

func (e *fakeClaims) named(name string) *enginespec.Container {
	for _, c := range e.containers {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func (e *fakeClaims) view(id sandboxIdentity, chosen *Choice) ClaimView {
	v := ClaimView{Sandbox: id, Record: e.volumes[naming.Claim(id.Key)], Named: e.named(naming.Container(id.Key)), Chosen: chosen}
	if v.Record != nil {
		v.Member = e.containers[v.Record[afev1.LabelMember]]
	}
	return v
}

// apply does a step as the controller would; a rename of a name nobody
// bears, or to a name taken, does nothing (the engine refuses it).
func (e *fakeClaims) apply(id sandboxIdentity, step ClaimAction, chosen *Choice) {
	claim := naming.Claim(id.Key)
	switch step {
	case ClaimWriteRecord:
		if e.volumes[claim] == nil {
			e.volumes[claim] = RecordLabels(id, *chosen)
		}
	case ClaimRename:
		if c := e.named(e.volumes[claim][afev1.LabelMemberName]); c != nil && e.named(naming.Container(id.Key)) == nil {
			c.Name = naming.Container(id.Key)
		}
	case ClaimDropRecord:
		delete(e.volumes, claim)
	}
}

// Two Sandboxes race for one member: both write their records before
// either renames; the first rename wins, the second finds no container of
// the member's name. The winner is Bound; the loser drops its record and
// chooses again; the member is claimed once.
func TestClaimRace(t *testing.T) {
	p := testPool("p", t0, template())
	m := member(p, "1111111111", t0)
	a := sandboxID
	b := sandboxID
	b.Name, b.UID, b.Key = "tk-2", "sbx-uid-2", naming.Key("team", "tk-2")
	c := m.Container
	e := &fakeClaims{containers: map[string]*enginespec.Container{c.ID: &c}, volumes: map[string]map[string]string{}}
	chosen := &Choice{Result: Warm, Pool: p.Name, PoolUID: p.UID, Member: &m}

	next := func(id sandboxIdentity, chosen *Choice, want ClaimAction) {
		t.Helper()
		got := NextClaimStep(e.view(id, chosen))
		if got.Action != want {
			t.Fatalf("%s: %s (%s), want %s", id.Name, got.Action, got.Reason, want)
		}
		e.apply(id, got.Action, chosen)
	}
	next(a, chosen, ClaimWriteRecord)
	next(b, chosen, ClaimWriteRecord)
	// Both crash here and come back with nothing in memory: the records
	// carry the claims on.
	// Both decide to rename; a's rename lands first, b's is refused.
	if got := NextClaimStep(e.view(b, nil)); got.Action != ClaimRename {
		t.Fatalf("b: %s", got.Action)
	}
	next(a, nil, ClaimRename)
	e.apply(b, ClaimRename, nil)
	next(b, nil, ClaimDropRecord)
	next(b, nil, ClaimChoose)
	next(a, nil, ClaimBound)
	if c.Name != naming.Container(a.Key) || e.volumes[naming.Claim(b.Key)] != nil || e.volumes[naming.Claim(a.Key)] == nil {
		t.Fatalf("member %s, records %v", c.Name, e.volumes)
	}
	// b chooses again: the claimed member is no candidate any more.
	spec := template()
	if got := Choose(Request{ID: b, Spec: &spec, Shape: shapeOf(spec)}, []Pool{p}, []Member{{Container: c, Created: m.Created}}); got.Result != ColdEmpty {
		t.Fatalf("Choose after the race: %+v", got)
	}
}

func TestBinds(t *testing.T) {
	p := testPool("p", t0, template())
	m := member(p, "1111111111", t0)
	record := RecordLabels(sandboxID, Choice{Result: Warm, Pool: p.Name, PoolUID: p.UID, Member: &m})
	bound := func() *enginespec.Container { c := m.Container; c.Name = naming.Container(sandboxID.Key); return &c }
	with := func(c *enginespec.Container, k, v string) *enginespec.Container {
		c.Labels = withLabel(Member{Container: *c}, k, v).Labels
		return c
	}
	recordWith := func(k, v string) map[string]string {
		return withLabel(Member{Container: enginespec.Container{Labels: record}}, k, v).Labels
	}
	other := sandboxID
	other.UID = "sbx-uid-other"
	tests := map[string]struct {
		id     sandboxIdentity
		record map[string]string
		c      *enginespec.Container
		want   bool
	}{
		"the claimed member":               {sandboxID, record, bound(), true},
		"no record":                        {sandboxID, nil, bound(), false},
		"no container":                     {sandboxID, record, nil, false},
		"still under its pool name":        {sandboxID, record, func() *enginespec.Container { c := m.Container; return &c }(), false},
		"another container of the name":    {sandboxID, record, func() *enginespec.Container { c := bound(); c.ID = "else"; return c }(), false},
		"a later Sandbox of the name":      {other, record, bound(), false},
		"a record of another instance":     {sandboxID, recordWith(afev1.LabelController, "node-2"), bound(), false},
		"a record of another pool UID":     {sandboxID, recordWith(afev1.LabelPoolUID, "pool-uid-2"), bound(), false},
		"a member of another namespace":    {sandboxID, record, with(bound(), afev1.LabelNamespace, "other"), false},
		"a member of another pool":         {sandboxID, record, with(bound(), afev1.LabelPool, "q"), false},
		"a container that names a Sandbox": {sandboxID, record, with(bound(), afev1.LabelSandboxUID, sandboxID.UID), false},
		"a container in another role":      {sandboxID, record, with(bound(), afev1.LabelRole, afev1.RoleSandbox), false},
	}
	for name, tt := range tests {
		if got := Binds(tt.id, tt.record, tt.c); got != tt.want {
			t.Errorf("%s: Binds = %v, want %v", name, got, tt.want)
		}
	}
}

func TestBindsProxy(t *testing.T) {
	p := testPool("p", t0, template())
	m := member(p, "1111111111", t0)
	record := RecordLabels(sandboxID, Choice{Result: Warm, Pool: p.Name, PoolUID: p.UID, Member: &m})
	mid := MemberOf(sandboxID, record)
	proxy := func(name string, change func(l map[string]string)) *enginespec.Container {
		l := mid.Labels(afev1.RoleProxy)
		if change != nil {
			change(l)
		}
		return &enginespec.Container{ID: "proxy", Name: name, Labels: l}
	}
	claimed := naming.Proxy(sandboxID.Key)
	recordWith := func(k, v string) map[string]string {
		return withLabel(Member{Container: enginespec.Container{Labels: record}}, k, v).Labels
	}
	other := sandboxID
	other.UID = "sbx-uid-other"
	tests := map[string]struct {
		id     sandboxIdentity
		record map[string]string
		c      *enginespec.Container
		want   bool
	}{
		"the claimed member's proxy":    {sandboxID, record, proxy(claimed, nil), true},
		"no record":                     {sandboxID, nil, proxy(claimed, nil), false},
		"no container":                  {sandboxID, record, nil, false},
		"still under the member's name": {sandboxID, record, proxy(naming.MemberProxy(m.Name), nil), false},
		"a later Sandbox of the name":   {other, record, proxy(claimed, nil), false},
		"a record of another instance":  {sandboxID, recordWith(afev1.LabelController, "node-2"), proxy(claimed, nil), false},
		"a record of no pool UID":       {sandboxID, recordWith(afev1.LabelPoolUID, ""), proxy(claimed, func(l map[string]string) { delete(l, afev1.LabelPoolUID) }), false},
		"the proxy of another member": {sandboxID, record, proxy(claimed, func(l map[string]string) {
			l[afev1.LabelMemberName] = naming.Member(naming.Key("team", "p"), "2222222222")
		}), false},
		"a proxy of another pool UID":     {sandboxID, record, proxy(claimed, func(l map[string]string) { l[afev1.LabelPoolUID] = "pool-uid-2" }), false},
		"a proxy of another pool":         {sandboxID, record, proxy(claimed, func(l map[string]string) { l[afev1.LabelPool] = "q" }), false},
		"a proxy of another namespace":    {sandboxID, record, proxy(claimed, func(l map[string]string) { l[afev1.LabelNamespace] = "other" }), false},
		"a proxy of another instance":     {sandboxID, record, proxy(claimed, func(l map[string]string) { l[afev1.LabelController] = "node-2" }), false},
		"a proxy that names a Sandbox":    {sandboxID, record, proxy(claimed, func(l map[string]string) { l[afev1.LabelSandboxUID] = sandboxID.UID }), false},
		"the member's container, not its": {sandboxID, record, proxy(claimed, func(l map[string]string) { l[afev1.LabelRole] = afev1.RoleMember }), false},
	}
	for name, tt := range tests {
		if got := BindsProxy(tt.id, tt.record, tt.c); got != tt.want {
			t.Errorf("%s: BindsProxy = %v, want %v", name, got, tt.want)
		}
	}
}

func TestMemberObjectOf(t *testing.T) {
	p := testPool("p", t0, template())
	m := member(p, "1111111111", t0)
	record := RecordLabels(sandboxID, Choice{Result: Warm, Pool: p.Name, PoolUID: p.UID, Member: &m})
	mid := MemberOf(sandboxID, record)
	for _, role := range []string{afev1.RoleWorkspace, afev1.RoleNetwork, afev1.RoleProxy} {
		if !MemberObjectOf(sandboxID, record, mid.Labels(role), role) {
			t.Errorf("the member's %s is not its", role)
		}
		other := mid
		other.Name = naming.Member(naming.Key(sandboxID.Namespace, p.Name), "2222222222")
		if MemberObjectOf(sandboxID, record, other.Labels(role), role) {
			t.Errorf("another member's %s is taken for its", role)
		}
		if MemberObjectOf(sandboxID, record, mid.Labels(afev1.RoleImageVolume), role) {
			t.Errorf("an object of another role is taken for its %s", role)
		}
		if MemberObjectOf(sandboxID, map[string]string{afev1.LabelMemberName: m.Name}, mid.Labels(role), role) {
			t.Errorf("a record naming no pool binds the %s", role)
		}
	}
}
