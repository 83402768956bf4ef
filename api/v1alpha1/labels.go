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
	// LabelDenyIPs is, on a proxy container, the engine host's addresses
	// its squid refuses (AFE_EGRESS_DENY_IPS, comma-separated), written by
	// the controller when it made the proxy. It is not part of the spec
	// hash: a proxy whose list holds every address of the current one is
	// kept when an address goes away, and recreated when one comes.
	LabelDenyIPs = "afe.deny-ips"
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
)
