package connlimit

import (
	"context"
	"slices"
)

// Mark is taken before the engine is listed for a Sync: an element added
// after it is kept by that Sync, whose listing may predate its network.
func (h *Host) Mark() uint64 {
	if h == nil {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.gen
}

// Sync makes the table's sets hold exactly the subnets of the instance's
// sandbox networks and the egress addresses of its proxies, as listed
// after mark, besides the elements added since: it adds what a failed or
// earlier process's addition left out (and a flushed table lost), and
// removes what removed networks and proxies left behind. Only this
// instance's table is read and written.
func (h *Host) Sync(ctx context.Context, mark uint64, nets, proxies []string) error {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var script string
	changes := map[string][2][]string{}
	for set, want := range map[string][]string{SetNetworks: nets, SetProxies: proxies} {
		have, err := h.Elements(ctx, set)
		if err != nil {
			return err
		}
		want = canonicalAll(want)
		add, del := plan(have, want, func(e string) bool { return h.added[set+" "+e] > mark })
		script += elements("delete", h.table, set, del) + elements("add", h.table, set, add)
		changes[set] = [2][]string{want, del}
	}
	if script != "" {
		if _, err := h.nft(ctx, script, "-f", "-"); err != nil {
			return err
		}
	}
	for set, c := range changes {
		h.record(set, c[0], c[1])
	}
	return nil
}

// record notes in added what a Sync left in the set (under the lock, once
// its script ran: nft applies a script as one transaction): the wanted
// elements are there, as of no addition since any mark (0), so that
// adding one again costs nothing; the deleted ones are not.
func (h *Host) record(set string, want, del []string) {
	for _, e := range del {
		delete(h.added, set+" "+e)
	}
	for _, e := range want {
		if _, ok := h.added[set+" "+e]; !ok {
			h.added[set+" "+e] = 0
		}
	}
}

// plan is what to add to a set holding have so that it holds want, and
// what to delete from it, keeping the elements keep names.
func plan(have, want []string, keep func(string) bool) (add, del []string) {
	for _, e := range want {
		if !slices.Contains(have, e) && !slices.Contains(add, e) {
			add = append(add, e)
		}
	}
	for _, e := range have {
		if !slices.Contains(want, e) && !keep(e) {
			del = append(del, e)
		}
	}
	slices.Sort(add)
	slices.Sort(del)
	return add, del
}

// canonicalAll is the IPv4 elements of list, made Canonical.
func canonicalAll(list []string) []string {
	out := make([]string, 0, len(list))
	for _, e := range list {
		if c, err := Canonical(e); err == nil {
			out = append(out, c)
		}
	}
	return out
}

// Elements are the elements of the set (SetNetworks, SetProxies) of the
// instance's table, as nft lists them.
func (h *Host) Elements(ctx context.Context, set string) ([]string, error) {
	if h == nil {
		return nil, nil
	}
	out, err := h.nft(ctx, "", "-j", "list", "set", "ip", h.table, set)
	if err != nil {
		return nil, err
	}
	return parseElements(out)
}
