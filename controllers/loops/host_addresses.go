package loops

import (
	"context"
	"slices"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/hostaddrs"
)

// hostAddressPeriod is how often the host's addresses are read again besides
// the engine's network events: an interface's address changes without one.
const hostAddressPeriod = 30 * time.Second

// NetworkEvents is what HostAddresses watches of an engine that can say
// when networks come and go (docker.Client).
type NetworkEvents interface {
	NetworkEvents(ctx context.Context) (<-chan docker.Event, <-chan error)
}

// HostAddresses keeps the list of the engine host's addresses that every
// proxy refuses (the policy's DenyIPs, internal/egress): the gateways of the engine's
// networks, and the host's own interface addresses when this process runs
// in the engine host's network namespace, plus --egress-deny-ips. It reads
// them at the first proxy, again on each network the engine creates or
// removes and every hostAddressPeriod. When an address comes, every Sandbox
// with egress is looked at again and its proxy given the new list in place,
// as for an allowlist change: its connections and the sandbox container are
// kept. One that goes stays refused by the proxies until they are given
// their list again for another reason, which is harmless.
type HostAddresses struct {
	Engine hostaddrs.Engine
	// Events says when the engine's networks come and go (nil: the list is
	// read every hostAddressPeriod only).
	Events NetworkEvents
	// Inputs are the settings of the list; Networks and Local are read.
	Inputs hostaddrs.Inputs
	// Changed is called when the list changed (EnqueueEgress).
	Changed func(ctx context.Context)

	mu      sync.Mutex
	current []string
	loaded  bool
}

// NeedLeaderElection is true: only the leader makes proxies.
func (h *HostAddresses) NeedLeaderElection() bool { return true }

// Current returns the list, read now when it never was.
func (h *HostAddresses) Current(ctx context.Context) ([]string, error) {
	h.mu.Lock()
	list, loaded := h.current, h.loaded
	h.mu.Unlock()
	if loaded {
		return list, nil
	}
	list, _, err := h.refresh(ctx)
	return list, err
}

// refresh reads the list again and keeps it; changed is true when it holds
// an address the one kept before did not (not on the first read).
func (h *HostAddresses) refresh(ctx context.Context) (list []string, changed bool, err error) {
	list, own, err := hostaddrs.Read(ctx, h.Engine, h.Inputs)
	if err != nil {
		return nil, false, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.loaded && !own {
		logf.FromContext(ctx).Info("The engine host's own interface addresses are not known here (a remote engine, or a manager "+
			"outside the host's network namespace): proxies refuse the gateways of the engine's networks; list the host's "+
			"other addresses with --egress-deny-ips", "addresses", list)
	}
	// Only an address that comes makes the proxies out of date.
	changed = h.loaded && slices.ContainsFunc(list, func(a string) bool { return !slices.Contains(h.current, a) })
	h.current, h.loaded = list, true
	return list, changed, nil
}

// Start reads the list on the engine's network events and every
// hostAddressPeriod until ctx ends, and has the proxies of every Sandbox
// with egress brought up to date when it changed. Events that come
// together (a burst of sandboxes, each with its network) are read once.
func (h *HostAddresses) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("host-addresses")
	watcher := h.Events
	var events <-chan docker.Event
	var errs <-chan error
	tick := time.NewTicker(hostAddressPeriod)
	defer tick.Stop()
	for {
		if errs == nil && watcher != nil {
			events, errs = watcher.NetworkEvents(ctx)
		}
		list, changed, err := h.refresh(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			log.Error(err, "Cannot read the engine host's addresses; proxies keep the list they have")
		case changed:
			log.Info("The engine host's addresses changed; recreating the proxies with the new list", "addresses", list)
			h.Changed(ctx)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		case _, ok := <-events:
			if !ok || !settle(ctx, events, networkEventSettle) {
				events = nil // closed: errs says why
			}
		case err := <-errs:
			// Watched again after a period (and the list read again, for
			// what the gap hid): an engine that is down is not asked in a
			// loop.
			log.Info("Network event stream broke; watching again after a period", "error", err.Error())
			select {
			case <-ctx.Done():
				return nil
			case <-tick.C:
			}
			events, errs = nil, nil
		}
	}
}

// networkEventSettle is how long the watch waits for more network events
// before it reads the list.
const networkEventSettle = 200 * time.Millisecond

// settle drains events until none came for d, or for 10 d at most (a long
// burst does not hold the list back); false when the stream closed.
func settle(ctx context.Context, events <-chan docker.Event, d time.Duration) bool {
	longest := time.After(10 * d)
	for {
		select {
		case <-ctx.Done():
			return true
		case <-longest:
			return true
		case _, ok := <-events:
			if !ok {
				return false
			}
		case <-time.After(d):
			return true
		}
	}
}

// EnqueueEgress returns a HostAddresses.Changed that asks for every Sandbox
// with egress to be reconciled.
func EnqueueEgress(c client.Reader, enqueue func(namespace, name string)) func(ctx context.Context) {
	return func(ctx context.Context) {
		list := &afev1.SandboxList{}
		if err := c.List(ctx, list); err != nil {
			logf.FromContext(ctx).Error(err, "List sandboxes for new host addresses")
			return
		}
		for i := range list.Items {
			if len(list.Items[i].Spec.Egress) > 0 {
				enqueue(list.Items[i].Namespace, list.Items[i].Name)
			}
		}
	}
}
