package v1alpha1

// Labels carried by every Docker object the controller creates. They are part
// of the public contract: scripts and the periodic sweep find objects by them.
const (
	// LabelTicket is the ticket name, or the sandbox name when it has none.
	LabelTicket = "afe.ticket"
	// LabelNamespace is the namespace of the Sandbox.
	LabelNamespace = "afe.namespace"
	// LabelSandbox is the name of the Sandbox.
	LabelSandbox = "afe.sandbox"
	// LabelSandboxUID is the UID of the Sandbox; an object whose UID belongs
	// to another Sandbox is never adopted.
	LabelSandboxUID = "afe.sandbox-uid"
	// LabelScope is the Sandbox's scope.
	LabelScope = "afe.scope"
	// LabelRole is what the object is for: sandbox, proxy, network, workspace,
	// snapshot, snapshot-copy.
	LabelRole = "afe.role"
	// LabelSpecHash is the hash of the spec a container was created from.
	LabelSpecHash = "afe.spec-hash"
	// LabelAllowlist is, on a proxy container, the ID of the allowlist it
	// was created admitting (sandboxspec.Allowlist). What it admits now is
	// what its --admits says: the allowlist changes in place.
	LabelAllowlist = "afe.allowlist"
	// LabelController is the --instance of the controller that owns it.
	LabelController = "afe.controller"
	// LabelRun is the name of the Run that made a snapshot volume (and its
	// copy helpers).
	LabelRun = "afe.run"
	// LabelRunUID is the UID of that Run: an attempt executed again after a
	// crash finds its own snapshot by it.
	LabelRunUID = "afe.run-uid"
	// LabelTicketUID is the UID of the Ticket of a snapshot's sandbox, when
	// it has one: the snapshot outlives its sandbox while that ticket is not
	// finished, and after only when it says retainSnapshots.
	LabelTicketUID = "afe.ticket-uid"
	// LabelUser is the host uid:gid the controller allocated to a sandbox
	// container from --sandbox-id-range (a Sandbox without spec.user). It
	// is the record of the allocation: the ids taken on an engine are those
	// its containers carry here, for every controller instance, so a
	// restarted controller finds them again and a sandbox keeps its own
	// across recreations. On a snapshot volume it is the uid:gid of the
	// sandbox it was taken from, whose files a sandbox restored from it
	// with another user is given.
	LabelUser = "afe.uid"
	// LabelPool is the name of the SandboxPool a member was made for, on
	// the member's container, volume, network and proxy, and on a claim
	// record. Docker labels never change, so a claimed member keeps it.
	LabelPool = "afe.pool"
	// LabelPoolUID is the UID of that SandboxPool: a member of an earlier
	// pool of the same name is never claimed.
	LabelPoolUID = "afe.pool-uid"
	// LabelMember is, on a claim record, the ID of the member container the
	// Sandbox claimed.
	LabelMember = "afe.member"
	// LabelMemberName is, on a member's objects and on a claim record, the
	// name the member has in its pool: the name the claim renames from, and
	// the stem of the member's volume, network and proxy names
	// (internal/naming). A claimed member keeps it, and with it the host id
	// it was given (afe.uid).
	LabelMemberName = "afe.member-name"
)

// Values of LabelRole.
const (
	RoleSandbox   = "sandbox"
	RoleProxy     = "proxy"
	RoleNetwork   = "network"
	RoleWorkspace = "workspace"
	// RoleSnapshot marks a snapshot volume, afe-<key>-snap-<n>.
	RoleSnapshot = "snapshot"
	// RoleSnapshotCopy marks the short-lived, never started containers that
	// copy a workspace into or out of a snapshot volume.
	RoleSnapshotCopy = "snapshot-copy"
	// RoleImageVolume marks the volume made for a VOLUME path of a sandbox's
	// image, afe-<key>_vol-<hash of the path>: it lives as long as the
	// container, like the anonymous volume the engine would have made.
	RoleImageVolume = "image-volume"
	// RoleMember marks the container of a SandboxPool member. It carries
	// the pool's labels and no Sandbox's; the label stays when a Sandbox
	// claims it (labels never change): the claim record binds it then.
	// The member's volume, network and proxy carry the roles workspace,
	// network and proxy with the pool's labels.
	RoleMember = "member"
	// RoleClaim marks a claim record: the empty volume afe-<key>_claim
	// whose labels bind a Sandbox (afe.sandbox-uid) to the member it
	// claimed (afe.member, afe.pool, afe.pool-uid).
	RoleClaim = "claim"
	// RoleConnLimit marks the helper container afe-<instance>-conntrack
	// (no Sandbox's labels: the sweep never removes it), on the engine
	// host's network with NET_ADMIN alone, through which a manager given
	// --sandbox-conn-image installs the conntrack bound.
	RoleConnLimit = "conntrack"
)
