package loops

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/controllers/identity"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/naming"
	"afe.dev/sandbox/internal/pool"
	"afe.dev/sandbox/internal/sandboxspec"
)

// claimedMembers finds the Sandbox a claimed pool member serves, for the
// engine's events about the member (the commands executed in it, its
// start). A member's labels were written before its Sandbox existed and
// name none: it is the Sandbox's only when it bears the Sandbox's derived
// name and the Sandbox's claim record names its ID (pool.Binds), which is
// checked on the engine once per container and remembered.
type claimedMembers struct {
	engine   identity.VolumeInspector
	client   client.Reader
	instance string

	mu    sync.Mutex
	bound map[string]types.UID // container ID -> the Sandbox UID it was verified for
}

// maxBoundMembers bounds the bindings remembered; past it they are
// forgotten and checked again on the engine.
const maxBoundMembers = 4096

// claimRecordTimeout bounds the look at a claim record, made on the event
// pump once per claimed member.
const claimRecordTimeout = 5 * time.Second

func newClaimedMembers(engine identity.VolumeInspector, c client.Reader, instance string) *claimedMembers {
	return &claimedMembers{engine: engine, client: c, instance: instance, bound: map[string]types.UID{}}
}

// sandboxOf is the Sandbox the member, or the member's proxy, of ev
// serves; nil when the member is unclaimed (its container and proxy still
// bear its own names) or not bound to the Sandbox whose name it bears.
func (m *claimedMembers) sandboxOf(ev docker.Event) *afev1.Sandbox {
	if m == nil || m.client == nil || ev.ID == "" || ev.Name == "" {
		return nil
	}
	role, own := memberRole(ev.Labels)
	if role == "" || ev.Name == own {
		return nil
	}
	sbx := m.named(ev.Labels[afev1.LabelNamespace], ev.Name, role)
	if sbx == nil {
		return nil
	}
	m.mu.Lock()
	known := m.bound[ev.ID] == sbx.UID
	m.mu.Unlock()
	if known {
		return sbx
	}
	id := sandboxspec.IdentityOf(sbx, m.instance)
	ctx, cancel := context.WithTimeout(context.Background(), claimRecordTimeout)
	defer cancel()
	record, err := identity.ClaimRecord(ctx, m.engine, id)
	c := &docker.Container{ID: ev.ID, Name: ev.Name, Labels: ev.Labels}
	if err != nil || role == afev1.RoleMember && !pool.Binds(id, record, c) || role == afev1.RoleProxy && !pool.BindsProxy(id, record, c) {
		return nil
	}
	m.mu.Lock()
	if len(m.bound) >= maxBoundMembers {
		clear(m.bound)
	}
	m.bound[ev.ID] = sbx.UID
	m.mu.Unlock()
	return sbx
}

// memberRole is the role of a pool member's container of the labels (its
// container, or its proxy), and the name it bears until a Sandbox claims
// it; empty when the labels are no member's.
func memberRole(labels map[string]string) (role, own string) {
	member := labels[afev1.LabelMemberName]
	switch {
	case member == "" || labels[afev1.LabelPoolUID] == "":
		return "", ""
	case labels[afev1.LabelRole] == afev1.RoleMember:
		return afev1.RoleMember, member
	case labels[afev1.LabelRole] == afev1.RoleProxy:
		return afev1.RoleProxy, naming.MemberProxy(member)
	}
	return "", ""
}

// named is the Sandbox of the namespace whose derived name in the role (a
// member's container bears the Sandbox's container name once claimed, its
// proxy the Sandbox's proxy name) is name, from the cache; nil when none.
func (m *claimedMembers) named(namespace, name, role string) *afev1.Sandbox {
	if namespace == "" {
		return nil
	}
	derived := naming.Container
	if role == afev1.RoleProxy {
		derived = naming.Proxy
	}
	list := &afev1.SandboxList{}
	if err := m.client.List(context.Background(), list, client.InNamespace(namespace)); err != nil {
		return nil
	}
	for i := range list.Items {
		if derived(naming.Key(namespace, list.Items[i].Name)) == name {
			return &list.Items[i]
		}
	}
	return nil
}
