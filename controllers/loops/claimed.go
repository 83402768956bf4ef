package loops

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/controllers/shared"
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
	engine   shared.VolumeInspector
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

func newClaimedMembers(engine shared.VolumeInspector, c client.Reader, instance string) *claimedMembers {
	return &claimedMembers{engine: engine, client: c, instance: instance, bound: map[string]types.UID{}}
}

// sandboxOf is the Sandbox the member of ev serves; nil when the member is
// unclaimed (it still bears its own name) or not bound to the Sandbox
// whose name it bears.
func (m *claimedMembers) sandboxOf(ev docker.Event) *afev1.Sandbox {
	if m == nil || m.client == nil || ev.Labels[afev1.LabelRole] != afev1.RoleMember ||
		ev.ID == "" || ev.Name == "" || ev.Name == ev.Labels[afev1.LabelMemberName] {
		return nil
	}
	sbx := m.named(ev.Labels[afev1.LabelNamespace], ev.Name)
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
	record, err := shared.ClaimRecord(ctx, m.engine, id)
	if err != nil || !pool.Binds(id, record, &docker.Container{ID: ev.ID, Name: ev.Name, Labels: ev.Labels}) {
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

// named is the Sandbox of the namespace whose derived container name is
// name, from the cache; nil when none.
func (m *claimedMembers) named(namespace, name string) *afev1.Sandbox {
	if namespace == "" {
		return nil
	}
	list := &afev1.SandboxList{}
	if err := m.client.List(context.Background(), list, client.InNamespace(namespace)); err != nil {
		return nil
	}
	for i := range list.Items {
		if naming.Container(naming.Key(namespace, list.Items[i].Name)) == name {
			return &list.Items[i]
		}
	}
	return nil
}
