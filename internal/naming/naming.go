// Package naming derives the fixed Docker names of a sandbox's objects.
package naming

import (
	"crypto/sha256"
	"encoding/hex"
)

// maxKey bounds the key so that every derived name stays short.
const maxKey = 100

// Key is unique per namespace and name and valid in Docker names. Kubernetes
// namespaces cannot contain dots, so "<namespace>.<name>" is unambiguous;
// longer keys are cut and end in "_" and a hash of the whole, and "_" never
// appears in a Kubernetes name.
func Key(namespace, name string) string {
	k := namespace + "." + name
	if len(k) <= maxKey {
		return k
	}
	sum := sha256.Sum256([]byte(k))
	return k[:maxKey-17] + "_" + hex.EncodeToString(sum[:8])
}

// Container is the name of the sandbox container.
func Container(key string) string { return "afe-" + key }

// Volume is the name of the workspace volume.
func Volume(key string) string { return "afe-" + key + "-ws" }

// Network is the name of the internal network of a sandbox with egress.
func Network(key string) string { return "afe-" + key + "-net" }

// Proxy is the name of the egress proxy container.
func Proxy(key string) string { return "afe-" + key + "-proxy" }
