package loops

import (
	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/naming"
	"afe.dev/sandbox/internal/sandboxspec"
)

// egressOwner is the one decision of whose egress a proxy container logs:
// the identity its records are written under, false when they are written
// under none (the container is not a verified proxy of a Sandbox of this
// instance). It is decided from the container as the engine reports it
// (labels and name) and the Sandbox the API server holds, never from the
// log.
//
//   - A sandbox's own proxy: its labels name this instance, the role proxy,
//     and the namespace, name and UID of a Sandbox that exists (get), and
//     it bears that Sandbox's proxy name.
//   - A claimed warm-pool member's proxy (labels afe.pool-uid and
//     afe.member-name, no sandbox UID): member says which Sandbox its claim
//     binds it to (the pool's pool.BindsProxy, checked on the claim record;
//     nil when none), and it must bear that Sandbox's proxy name, as it
//     does once renamed at the claim. An unclaimed member's proxy serves no
//     sandbox yet (it admits nothing). Without a member function such a
//     proxy is followed by nobody.
func egressOwner(c docker.Container, instance string, get func(namespace, name string) *afev1.Sandbox,
	member func(docker.Container) *afev1.Sandbox) (sandboxspec.Identity, bool) {
	l := c.Labels
	if l[afev1.LabelRole] != afev1.RoleProxy || l[afev1.LabelController] != instance || instance == "" {
		return sandboxspec.Identity{}, false
	}
	var sbx *afev1.Sandbox
	if l[afev1.LabelPoolUID] != "" {
		if member != nil {
			sbx = member(c)
		}
	} else {
		sbx = get(l[afev1.LabelNamespace], l[afev1.LabelSandbox])
	}
	if sbx == nil {
		return sandboxspec.Identity{}, false
	}
	id := sandboxspec.IdentityOf(sbx, instance)
	if c.Name != naming.Proxy(id.Key) {
		return sandboxspec.Identity{}, false
	}
	if l[afev1.LabelPoolUID] == "" && !id.OwnsAs(l, afev1.RoleProxy) {
		return sandboxspec.Identity{}, false
	}
	return id, true
}
