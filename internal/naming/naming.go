// Package naming derives the fixed Docker names of a sandbox's objects.
//
// Every name starts with "afe-" and the sandbox's key. The suffixes of the
// objects other than the container itself ("_ws", "_net", "_proxy",
// "_snap-<n>", "_restore", "_copy", "_vol-<hash>") begin with "_", a character no
// Kubernetes name contains, so that no object of one sandbox can be named
// like an object of another sandbox of the same namespace (a Sandbox named
// "x-proxy" beside a Sandbox "x", say).
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

// LegacyVolume is the workspace volume's name before the "_" suffixes.
func LegacyVolume(key string) string { return "afe-" + key + "-ws" }

// LegacyNetwork is the network's name before the "_" suffixes.
func LegacyNetwork(key string) string { return "afe-" + key + "-net" }

// LegacyProxy is the proxy's name before the "_" suffixes.
func LegacyProxy(key string) string { return "afe-" + key + "-proxy" }
