package pool

import (
	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/enginespec"
	"afe.dev/sandbox/internal/naming"
	"afe.dev/sandbox/internal/sandboxspec"
)

// A claim binds a pool member to a Sandbox on the engine, in three steps
// that each leave the engine in a state NextClaimStep reads back after a
// crash:
//
//  1. WriteRecord: an empty volume named naming.Claim(key), the claim
//     record, labelled with the Sandbox's identity (RecordLabels): its UID,
//     the member's container ID and pool name, the pool's name and UID. A
//     create of an existing name returns the existing volume, so the
//     labels read back decide whose record it is.
//  2. Rename: the member is renamed by its pool name (the record's
//     afe.member-name), not by ID, to the Sandbox's name,
//     naming.Container(key). A second claimant finds no container of that
//     name, drops its record and chooses again or goes cold.
//  3. Bound: from then on the container is the Sandbox's only while it
//     bears the Sandbox's name, its labels name the record's pool, and the
//     record (its labels verified) names the Sandbox's UID and this
//     container's ID. Never because of a status field.
//
// The engine resolves the old name of a rename before it locks the
// container (moby's daemon/rename.go), so two renames of one member in
// flight at once may both succeed, the last one winning: the rename is a
// compare-and-swap only between claims that do not overlap. The
// controller therefore runs the claims of one pool one at a time (its
// members belong to this instance alone, and one manager runs an
// instance), and the rename stays the guard between a manager and the one
// before it; Choose offers no member that another Sandbox's record names.
// The pool's own removals of unclaimed members (a template change, a
// lowered replicas, the pool's deletion) take the same turn and skip the
// members a record names: a removal by ID racing a rename would remove a
// container just claimed.
//
// When a Sandbox is deleted, its container, the member's volume, network
// and proxy (named from the record's afe.member-name) go first and the
// record last, so that a crash in between still finds them from it. The
// record carries afe.sandbox-uid, so the sweep removes a record whose
// Sandbox is gone; a claimed container carries no Sandbox's labels, so the
// sweep leaves it: one bearing a Sandbox's name with no record is removed
// by the next Sandbox of that name (RemoveOrphan), and the pool's sweep
// must remove the member objects no member and no record name.

// ClaimAction is the next step of a claim.
type ClaimAction string

const (
	// ClaimChoose means nothing is claimed and the Sandbox's name is free:
	// Choose a member, or go cold.
	ClaimChoose ClaimAction = "Choose"
	// ClaimWriteRecord means a member was chosen: write the claim record
	// (RecordLabels), then decide again with the record read back.
	ClaimWriteRecord ClaimAction = "WriteRecord"
	// ClaimRename means the record is ours and its member waits under its pool
	// name: rename it, by that name, to the Sandbox's.
	ClaimRename ClaimAction = "Rename"
	// ClaimBound means the container bearing the Sandbox's name is its claimed
	// member.
	ClaimBound ClaimAction = "Bound"
	// ClaimDropRecord means the record is ours but binds nothing: its member is
	// gone, exited before the claim, bears another name (another Sandbox
	// won it), does not verify, or the Sandbox's name is taken. Remove the
	// record, then decide again.
	ClaimDropRecord ClaimAction = "DropRecord"
	// ClaimRelease means the record binds a member that must go: ours, exited
	// after its claim (a loss), or one an earlier Sandbox of this name
	// claimed (a stale record). Remove the record's member if it bears the
	// Sandbox's name, its volume, network and proxy, then the record.
	ClaimRelease ClaimAction = "Release"
	// ClaimRemoveOrphan means a member bears the Sandbox's name and no record
	// binds it (what was claimed for an earlier Sandbox of this name, whose
	// record went first): remove it and its volume, network and proxy; it
	// holds another tenant's workspace.
	ClaimRemoveOrphan ClaimAction = "RemoveOrphan"
	// ClaimConflict means the record of the name belongs to another Sandbox or
	// controller instance: left alone, as a name conflict.
	ClaimConflict ClaimAction = "Conflict"
	// ClaimNone means the container bearing the Sandbox's name is no member (a
	// cold sandbox's, or another's): the container plan decides, as for
	// any sandbox.
	ClaimNone ClaimAction = "None"
)

// ClaimView is what the engine shows of a Sandbox's claim.
type ClaimView struct {
	// Sandbox is the claimant.
	Sandbox sandboxspec.Identity
	// Record is the labels of the volume naming.Claim(key); nil when there
	// is none.
	Record map[string]string
	// Member is the container the record's afe.member ID names (inspected
	// by ID); nil without a record, or when it is gone.
	Member *enginespec.Container
	// Named is the container bearing the Sandbox's name,
	// naming.Container(key); nil when none.
	Named *enginespec.Container
	// Chosen is the member Choose gave in this pass; nil when none.
	Chosen *Choice
}

// ClaimStep is the next step and why, for the log.
type ClaimStep struct {
	Action ClaimAction
	Reason string
}

// NextClaimStep decides the next step of a Sandbox's claim from what the
// engine shows; each step's effect is read back before the next.
func NextClaimStep(v ClaimView) ClaimStep {
	id := v.Sandbox
	if v.Record == nil {
		return withoutRecord(v)
	}
	if !ownsRecord(id, v.Record) {
		if id.Stale(v.Record, afev1.RoleClaim) {
			return ClaimStep{ClaimRelease, "the claim record is an earlier Sandbox's of this name"}
		}
		return ClaimStep{ClaimConflict, "the claim record belongs to another Sandbox or controller instance"}
	}
	m := v.Member
	switch {
	case m == nil || m.ID != v.Record[afev1.LabelMember]:
		return ClaimStep{ClaimDropRecord, "the member the record names is gone"}
	case !memberVerifies(id, v.Record, m.Labels):
		return ClaimStep{ClaimDropRecord, "the member's labels do not name the record's pool, namespace and instance"}
	}
	switch m.Name {
	case naming.Container(id.Key):
		if !m.Running {
			return ClaimStep{ClaimRelease, "the claimed container exited"}
		}
		return ClaimStep{ClaimBound, ""}
	case v.Record[afev1.LabelMemberName]:
		switch {
		case !m.Running:
			return ClaimStep{ClaimDropRecord, "the member exited before its claim"}
		case v.Named != nil:
			return ClaimStep{ClaimDropRecord, "another container bears the sandbox's name"}
		}
		return ClaimStep{ClaimRename, ""}
	}
	return ClaimStep{ClaimDropRecord, "the member bears another name: another Sandbox claimed it"}
}

// withoutRecord decides for a Sandbox that has no claim record.
func withoutRecord(v ClaimView) ClaimStep {
	if n := v.Named; n != nil {
		l := n.Labels
		if l[afev1.LabelRole] == afev1.RoleMember && l[afev1.LabelSandboxUID] == "" &&
			l[afev1.LabelNamespace] == v.Sandbox.Namespace && l[afev1.LabelController] == v.Sandbox.Instance {
			return ClaimStep{ClaimRemoveOrphan, "a member bears the sandbox's name and no claim record binds it"}
		}
		return ClaimStep{ClaimNone, ""}
	}
	if v.Chosen != nil && v.Chosen.Result == Warm && v.Chosen.Member != nil {
		return ClaimStep{ClaimWriteRecord, ""}
	}
	return ClaimStep{ClaimChoose, ""}
}

// Binds is true when the container c is the Sandbox's claimed member: it
// bears the Sandbox's name, the record (labels of the volume
// naming.Claim(key)) is the Sandbox's and names c's ID, and c's labels name
// the record's pool, the Sandbox's namespace and instance, the member role
// and no Sandbox. What every action on a claimed container checks first,
// never a status field.
func Binds(id sandboxspec.Identity, record map[string]string, c *enginespec.Container) bool {
	return c != nil && record != nil && ownsRecord(id, record) &&
		c.Name == naming.Container(id.Key) && c.ID != "" && c.ID == record[afev1.LabelMember] &&
		memberVerifies(id, record, c.Labels)
}

// OwnsRecord is true when the labels of a claim record name this Sandbox
// and instance.
func OwnsRecord(id sandboxspec.Identity, record map[string]string) bool {
	return ownsRecord(id, record)
}

// MemberVolumeOf is true when a volume's labels make it the workspace of
// the member a record names (MemberObjectOf).
func MemberVolumeOf(id sandboxspec.Identity, record, labels map[string]string) bool {
	return MemberObjectOf(id, record, labels, afev1.RoleWorkspace)
}

// MemberObjectOf is true when an object's labels make it the member's
// object in the role (its workspace, network or proxy) of the member a
// record names: the role, the record's member name and pool, the Sandbox's
// namespace and instance, and no Sandbox.
func MemberObjectOf(id sandboxspec.Identity, record, labels map[string]string, role string) bool {
	return labels[afev1.LabelRole] == role && labels[afev1.LabelSandboxUID] == "" &&
		record[afev1.LabelMemberName] != "" && labels[afev1.LabelMemberName] == record[afev1.LabelMemberName] &&
		labels[afev1.LabelNamespace] == id.Namespace && labels[afev1.LabelController] == id.Instance &&
		record[afev1.LabelPoolUID] != "" && labels[afev1.LabelPoolUID] == record[afev1.LabelPoolUID] &&
		labels[afev1.LabelPool] == record[afev1.LabelPool]
}

// BindsProxy is true when the container c is the proxy of the Sandbox's
// claimed member: it bears the Sandbox's proxy name, the record is the
// Sandbox's, and c's labels make it the proxy of the member the record
// names (MemberObjectOf). A member's proxy is renamed to the Sandbox's
// proxy name once the member is claimed; its network, which the engine
// cannot rename, keeps the member's.
func BindsProxy(id sandboxspec.Identity, record map[string]string, c *enginespec.Container) bool {
	return c != nil && record != nil && ownsRecord(id, record) &&
		c.Name == naming.Proxy(id.Key) && MemberObjectOf(id, record, c.Labels, afev1.RoleProxy)
}

// MemberOf is the identity of the member a Sandbox's record names, to name
// and label the member's objects made after the claim (a lost proxy made
// again).
func MemberOf(id sandboxspec.Identity, record map[string]string) sandboxspec.MemberIdentity {
	return sandboxspec.MemberIdentity{Namespace: id.Namespace, Pool: record[afev1.LabelPool],
		PoolUID: record[afev1.LabelPoolUID], Instance: id.Instance, Name: record[afev1.LabelMemberName]}
}

// ownsRecord is true when the record's labels name this Sandbox and
// instance in the claim role.
func ownsRecord(id sandboxspec.Identity, record map[string]string) bool {
	return id.OwnsAs(record, afev1.RoleClaim) &&
		record[afev1.LabelNamespace] == id.Namespace && record[afev1.LabelSandbox] == id.Name
}

// memberVerifies is true when a member's labels name the record's pool
// (name and UID), the Sandbox's namespace and instance, the member role,
// and no Sandbox.
func memberVerifies(id sandboxspec.Identity, record, labels map[string]string) bool {
	return labels[afev1.LabelRole] == afev1.RoleMember && labels[afev1.LabelSandboxUID] == "" &&
		labels[afev1.LabelNamespace] == id.Namespace && labels[afev1.LabelController] == id.Instance &&
		record[afev1.LabelPool] != "" && labels[afev1.LabelPool] == record[afev1.LabelPool] &&
		record[afev1.LabelPoolUID] != "" && labels[afev1.LabelPoolUID] == record[afev1.LabelPoolUID]
}

// RecordLabels are the labels of the claim record of a Sandbox that chose
// a member: the Sandbox's identity in the claim role, the pool, the
// member's container ID and its pool name (the stem of its volume,
// network and proxy names).
func RecordLabels(id sandboxspec.Identity, c Choice) map[string]string {
	l := id.Labels(afev1.RoleClaim)
	l[afev1.LabelPool] = c.Pool
	l[afev1.LabelPoolUID] = c.PoolUID
	if c.Member != nil {
		l[afev1.LabelMember] = c.Member.ID
		l[afev1.LabelMemberName] = c.Member.Name
	}
	return l
}

// Record is the claim record's volume for a Sandbox that chose a member.
func Record(id sandboxspec.Identity, c Choice) enginespec.VolumeSpec {
	return enginespec.VolumeSpec{Name: naming.Claim(id.Key), Labels: RecordLabels(id, c)}
}
