package connlimit

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// Host keeps the instance's table in the engine host's network namespace,
// with nft: the host's own, run by this process when the manager runs
// there as root (make run), or one in a helper container of the engine
// (the Deployment, the DaemonSet). A nil *Host is the bound turned off:
// its methods do nothing.
type Host struct {
	table  string
	limits Limits
	nft    Nft

	mu sync.Mutex
	// gen counts the additions; added holds, for each element known to
	// be in the table ("set element"), the gen of its addition.
	gen   uint64
	added map[string]uint64
}

// New is the Host of the controller instance, nil when the limits are off;
// it runs nft with run (LocalNft when nil).
func New(instance string, l Limits, run Nft) (*Host, error) {
	if !l.Enabled() {
		return nil, nil
	}
	if err := l.Validate(); err != nil {
		return nil, err
	}
	table, err := Table(instance)
	if err != nil {
		return nil, err
	}
	if run == nil {
		run = LocalNft
	}
	return &Host{table: table, limits: l, nft: run, added: map[string]uint64{}}, nil
}

// TableName is the name of the instance's table ("" when off).
func (h *Host) TableName() string {
	if h == nil {
		return ""
	}
	return h.table
}

// Install makes the table, or brings it to the limits keeping its
// elements, after checking that this process sees the engine's bridge
// (the host's network namespace: rules made anywhere else would bound
// nothing), when that bridge is known ("" when the engine could not be
// asked, or nft runs in the engine's helper, on the host's network by
// construction).
func (h *Host) Install(ctx context.Context, bridge string) error {
	if h == nil {
		return nil
	}
	if bridge != "" {
		if _, err := os.Stat(filepath.Join("/sys/class/net", bridge)); err != nil {
			return fmt.Errorf("the engine's bridge %s is not in this process's network namespace (not the engine's host): %w", bridge, err)
		}
	}
	_, err := h.nft(ctx, Ruleset(h.table, h.limits), "-f", "-")
	return err
}

// AddNetwork bounds the sources of the network's subnets; a subnet already
// added by this process costs nothing.
func (h *Host) AddNetwork(ctx context.Context, subnets []string) error {
	return h.add(ctx, SetNetworks, subnets)
}

// AddProxy bounds a proxy's address on the egress network.
func (h *Host) AddProxy(ctx context.Context, addr string) error {
	return h.add(ctx, SetProxies, []string{addr})
}

// add puts the IPv4 elements into the set; IPv6 ones are left out (no
// sandbox network has IPv6).
func (h *Host) add(ctx context.Context, set string, elems []string) error {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var todo []string
	for _, e := range elems {
		c, err := Canonical(e)
		if err != nil {
			continue
		}
		if _, ok := h.added[set+" "+c]; !ok {
			todo = append(todo, c)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	if _, err := h.nft(ctx, elements("add", h.table, set, todo), "-f", "-"); err != nil {
		return err
	}
	h.gen++
	for _, c := range todo {
		h.added[set+" "+c] = h.gen
	}
	return nil
}
