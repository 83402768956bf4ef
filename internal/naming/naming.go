// Package naming derives the fixed Docker names of a sandbox's objects.
//
// Every name starts with "afe-" and the sandbox's key. The suffixes of the
// objects other than the container itself ("_ws", "_net", "_proxy",
// "_snap-<n>", "_restore", "_copy", "_vol-<hash>") begin with "_", a character no
// Kubernetes name contains, so that no object of one sandbox can be named
// like an object of another sandbox of the same namespace (a Sandbox named
// "x-proxy" beside a Sandbox "x", say).
//
// A SandboxPool's members are named from the pool's key (Key of its
// namespace and name) and a random ID of each member's own:
// "afe-<pool key>_member-<id>", and "_ws", "_net", "_proxy" after that for
// its volume, network and proxy. No sandbox's name is a member's: a
// sandbox's key holds a "_" only where it was cut, followed by 16 hex
// digits and nothing else, and no sandbox suffix starts with "_member-".
// A claimed member's container takes its Sandbox's name, Container(key);
// its volume and network keep the member's names (the engine renames
// neither), which the claim record, Claim(key), names.
//
// Objects made before that rule carry the legacy names ("-ws", "-net",
// "-proxy", "-snap-<n>"); the Legacy functions give them, so that an upgraded
// controller keeps a workspace it made and removes the rest (docs/upgrade.md).
// A legacy name alone never proves ownership: the labels of the object found
// decide.
package naming

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"strconv"
	"strings"
)

// maxKey bounds the key so that every derived name stays short.
const maxKey = 100

// Key is unique per namespace and name and valid in Docker names. Kubernetes
// namespaces cannot contain dots, so "<namespace>.<name>" is unambiguous;
// longer keys are cut and end in "_" and a hash of the whole (16 hex
// digits, which no suffix below is).
func Key(namespace, name string) string {
	k := namespace + "." + name
	if len(k) <= maxKey {
		return k
	}
	return k[:maxKey-17] + "_" + Hash(k)
}

// Hash is 16 hex digits of the SHA-256 of s: what ends a name cut to fit,
// so that names cut alike stay distinct.
func Hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:8])
}

// Container is the name of the sandbox container.
func Container(key string) string { return "afe-" + key }

// Volume is the name of the workspace volume.
func Volume(key string) string { return "afe-" + key + "_ws" }

// Network is the name of the sandbox's internal network.
func Network(key string) string { return "afe-" + key + "_net" }

// Proxy is the name of the egress proxy container.
func Proxy(key string) string { return "afe-" + key + "_proxy" }

// Snapshot is the name of the sandbox's n-th snapshot volume.
func Snapshot(key string, n int) string { return "afe-" + key + "_snap-" + strconv.Itoa(n) }

// ImageVolume is the name of the volume made for a VOLUME path of the
// sandbox's image: a hash of the path, which may hold any character.
func ImageVolume(key, path string) string {
	sum := sha256.Sum256([]byte(path))
	return "afe-" + key + "_vol-" + hex.EncodeToString(sum[:6])
}

// Restore prefixes the helpers that fill a workspace from a snapshot.
func Restore(key string) string { return "afe-" + key + "_restore" }

// Move prefixes the helpers that read a workspace out of the node a moved
// ticket leaves (Move(key)+"-out") and write it into the node it arrives on
// (Move(key)+"-in").
func Move(key string) string { return "afe-" + key + "_move" }

// MoveStaging is the volume a moved workspace is filled into while the
// workspace volume's name is still taken on the engine (nodes that share
// one engine): it is copied into the workspace volume once that is free.
// Its name is the receiving instance's own (moveInstance).
func MoveStaging(key, instance string) string { return Move(key) + "_in-" + moveInstance(instance) }

// MoveVerified is the empty volume whose creation records that a moved
// workspace arrived whole at instance: the node it left removes its copy
// once it exists. On an engine the nodes share, each instance's record has
// a name of its own, so that one left by an earlier move there is never
// in the way of the next move's.
func MoveVerified(key, instance string) string { return Move(key) + "_ok-" + moveInstance(instance) }

// moveInstance is a short hash of an instance's name, which may be long.
func moveInstance(instance string) string {
	sum := sha256.Sum256([]byte(instance))
	return hex.EncodeToString(sum[:6])
}

// SnapshotSend is the helper that reads a snapshot volume out for another
// node's manager (a ticket made afresh after its node was lost restores
// it there): created, never started, removed once read.
func SnapshotSend(snapshot string) string { return snapshot + "_send" }

// CopyHelper prefixes the helpers that copy a workspace into the snapshot
// volume (never started; removed after the copy).
func CopyHelper(snapshot string) string { return snapshot + "_copy" }

// SnapshotNumber is n of one of the sandbox's snapshot volume names, legacy
// or current, and 0 when the name is not one.
func SnapshotNumber(key, volume string) int {
	s, ok := strings.CutPrefix(volume, "afe-"+key+"_snap-")
	if !ok {
		s, ok = strings.CutPrefix(volume, "afe-"+key+"-snap-")
	}
	if !ok || s == "" || len(s) > 9 || s[0] == '0' {
		return 0
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0
	}
	return n
}

// NextSnapshot is the number after the highest of the names.
func NextSnapshot(key string, volumes []string) int {
	n := 0
	for _, v := range volumes {
		n = max(n, SnapshotNumber(key, v))
	}
	return n + 1
}

// Claim is the name of a sandbox's claim record: the empty volume whose
// labels bind the Sandbox to the pool member it claimed.
func Claim(key string) string { return "afe-" + key + "_claim" }

// memberInfix separates a pool's key from a member's ID.
const memberInfix = "_member-"

// MemberIDLength is the length of a member's ID: lowercase hex digits.
const MemberIDLength = 10

// Member is the name of a pool member's container while it is unclaimed,
// from the pool's key and the member's ID: the stem of the names of the
// member's volume, network and proxy too.
//
// The ID is random (NewMemberID), not an index: a claimed member keeps its
// volume and network under the member's names, so an index would come
// back while they live; a claim renames the member by this name, and a
// name never given twice means a rename that comes late finds no other
// member under it; and refills in parallel need no agreement on indexes.
func Member(poolKey, id string) string { return "afe-" + poolKey + memberInfix + id }

// MemberVolume is the name of a member's workspace volume.
func MemberVolume(member string) string { return member + "_ws" }

// MemberNetwork is the name of a member's internal network (egress).
func MemberNetwork(member string) string { return member + "_net" }

// MemberProxy is the name of a member's egress proxy.
func MemberProxy(member string) string { return member + "_proxy" }

// MemberImageVolume is the name of the volume made for a VOLUME path of a
// member's image.
func MemberImageVolume(member, path string) string {
	sum := sha256.Sum256([]byte(path))
	return member + "_vol-" + hex.EncodeToString(sum[:6])
}

// MemberID is the ID in the name of an unclaimed member of the pool of
// the key, and false when the name is no such member's (a claimed member
// bears its Sandbox's name).
func MemberID(poolKey, name string) (string, bool) {
	id, ok := strings.CutPrefix(name, "afe-"+poolKey+memberInfix)
	return id, ok && IsMemberID(id)
}

// IsMemberID is true for an ID NewMemberID could have made.
func IsMemberID(id string) bool {
	if len(id) != MemberIDLength {
		return false
	}
	for _, c := range id {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// NewMemberID is a member ID from random bytes (MemberIDLength/2 of them
// are read from r; crypto/rand.Reader in the controller).
func NewMemberID(r io.Reader) (string, error) {
	b := make([]byte, MemberIDLength/2)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// LegacyVolume is the workspace volume's name before the "_" suffixes.
func LegacyVolume(key string) string { return "afe-" + key + "-ws" }

// LegacyNetwork is the network's name before the "_" suffixes.
func LegacyNetwork(key string) string { return "afe-" + key + "-net" }

// LegacyProxy is the proxy's name before the "_" suffixes.
func LegacyProxy(key string) string { return "afe-" + key + "-proxy" }
