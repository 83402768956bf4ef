// Package move is the protocol by which the managers of per-node mode move
// a ticket's sandboxes between nodes: a ticket moved off a drained node
// (NodeDrained) takes its sandboxes' workspaces and Run logs along, manager
// to manager, with no caller behind the request, and a ticket made afresh
// after its node was lost (NodeLost) restores the newest snapshot another
// node keeps of it. The routes are served on the access API's peer
// listener (mutually authenticated with the managers' CA):
//
//	GET /afe-peer/v1/namespaces/NS/sandboxes/NAME/workspace?uid=UID
//	GET /afe-peer/v1/namespaces/NS/sandboxes/NAME/runlogs?uid=UID
//	GET /afe-peer/v1/namespaces/NS/sandboxes/NAME/holds?uid=UID
//	GET /afe-peer/v1/namespaces/NS/sandboxes/NAME/snapshots?uid=UID
//	GET /afe-peer/v1/namespaces/NS/sandboxes/NAME/snapshot?uid=UID&volume=V
//
// The asking manager is the node of its client certificate (the managers'
// CA). A workspace or Run logs go only to the manager of the node the
// sandbox's ticket is placed on now (its placeholder Pod's, never a status
// field), and only for the Sandbox of that UID; the container whose
// workspace is sent is the sandbox's own by its derived name and labels,
// and is stopped first. holds answers any manager whether this one runs
// the sandbox of that UID: the node it left asks it before removing its
// own copy. A ticket made afresh after its node was lost asks every
// manager for the snapshots it keeps of the ticket under the sandbox's
// name, and restores the newest: a manager lists and sends only snapshot
// volumes of its own instance whose labels name that namespace, sandbox
// name and the UID of the Ticket that controls the Sandbox, and only to
// the manager of the node that ticket is placed on now.
//
// Mover is what the reconcilers ask of a move (mover.go); Client asks the
// other managers for it (ask.go), Handler answers them (serve.go), and a
// tree travels with its size and SHA-256 (tree.go). The peer channel
// itself, the managers' register and their certificates, is the access
// API's (access.Server.MovePeers).
package move
