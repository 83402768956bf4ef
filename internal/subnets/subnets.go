// Package subnets chooses the subnets of the sandboxes' internal networks
// from the controller's own ranges (--egress-subnets), in blocks just large
// enough for one sandbox: a /29 holds the network and broadcast addresses,
// the gateway slot the engine reserves, the sandbox and its proxy.
//
// Nothing here remembers anything: the subnets in use are always what the
// engine reports of all its networks (of every controller instance and
// every other user), plus what this process is creating at that moment, so
// an allocation survives a restart and is released with its network.
package subnets

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// Flag is the controller flag that sets the ranges; messages name it.
const Flag = "--egress-subnets"

// Default is the flag's default: the benchmarking range of RFC 2544, which
// no engine pool, cloud network or home router hands out by default and
// which the proxy refuses as a destination anyway. It holds 16384 blocks.
const Default = "198.18.0.0/15"

// BlockBits is the prefix length of one sandbox network.
const BlockBits = 29

const blockSize = 1 << (32 - BlockBits)

// ErrExhausted is returned when every block of the ranges is in use.
var ErrExhausted = errors.New("no free /29 block left in " + Flag)

// EngineDefaultPools are the engine's built-in default-address-pools
// (Docker 20.10 to 28), which apply when its daemon.json sets none.
var EngineDefaultPools = func() []netip.Prefix {
	var out []netip.Prefix
	for i := 17; i <= 31; i++ {
		out = append(out, netip.MustParsePrefix(fmt.Sprintf("172.%d.0.0/16", i)))
	}
	return append(out, netip.MustParsePrefix("192.168.0.0/16"))
}()

// Parse reads the flag's value: comma-separated IPv4 CIDRs, each a /29 or
// larger, written with its host bits zero, none overlapping another. An
// empty value is no range: the engine's own pools are used then.
func Parse(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		p, err := netip.ParsePrefix(f)
		switch {
		case err != nil:
			return nil, fmt.Errorf("%s: %q is not a CIDR", Flag, f)
		case !p.Addr().Is4():
			return nil, fmt.Errorf("%s: %s is not IPv4", Flag, f)
		case p.Bits() > BlockBits:
			return nil, fmt.Errorf("%s: %s is smaller than one /%d block", Flag, f, BlockBits)
		case p.Masked() != p:
			return nil, fmt.Errorf("%s: %s has host bits set (did you mean %s?)", Flag, f, p.Masked())
		}
		for _, q := range out {
			if q.Overlaps(p) {
				return nil, fmt.Errorf("%s: %s overlaps %s", Flag, p, q)
			}
		}
		out = append(out, p)
	}
	return out, nil
}

// Named is a subnet of something the ranges must stay clear of.
type Named struct {
	Prefix netip.Prefix
	// What it is, for the message: "the engine's default address pool",
	// "the host's route on eth0".
	What string
}

// CheckClear fails, naming every overlap, when a range overlaps one of the
// others. A default route (a /0) overlaps nothing.
func CheckClear(ranges []netip.Prefix, others []Named) error {
	var clash []string
	for _, r := range ranges {
		for _, o := range others {
			if o.Prefix.Bits() > 0 && r.Overlaps(o.Prefix) {
				clash = append(clash, fmt.Sprintf("%s overlaps %s %s", r, o.What, o.Prefix))
			}
		}
	}
	if len(clash) > 0 {
		return fmt.Errorf("%s: %s; choose ranges clear of them", Flag, strings.Join(clash, ", "))
	}
	return nil
}

// Free is the lowest /29 block of the ranges, taken in their order, that
// overlaps none of the subnets in use. It returns ErrExhausted when there
// is none.
func Free(ranges, inUse []netip.Prefix) (netip.Prefix, error) {
	type span struct{ lo, hi uint64 }
	used := make([]span, 0, len(inUse))
	for _, p := range inUse {
		if p.Addr().Is4() {
			lo, hi := bounds(p)
			used = append(used, span{lo, hi})
		}
	}
	slices.SortFunc(used, func(a, b span) int { return cmp.Compare(a.lo, b.lo) })
	for _, r := range ranges {
		lo, hi := bounds(r)
		cand := lo
		for _, u := range used {
			if cand+blockSize-1 > hi {
				break
			}
			if u.hi < cand {
				continue
			}
			if u.lo > cand+blockSize-1 {
				break
			}
			cand = (u.hi + blockSize) &^ (blockSize - 1)
		}
		if cand+blockSize-1 <= hi {
			return netip.PrefixFrom(addr(cand), BlockBits), nil
		}
	}
	return netip.Prefix{}, ErrExhausted
}

// bounds are the first and last address of p as numbers (uint64, so that
// the arithmetic past 255.255.255.255 does not wrap).
func bounds(p netip.Prefix) (lo, hi uint64) {
	b := p.Masked().Addr().As4()
	lo = uint64(b[0])<<24 | uint64(b[1])<<16 | uint64(b[2])<<8 | uint64(b[3])
	return lo, lo + 1<<(32-p.Bits()) - 1
}

func addr(n uint64) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
}

// Size is how many blocks the ranges hold.
func Size(ranges []netip.Prefix) int {
	n := 0
	for _, r := range ranges {
		n += 1 << (BlockBits - r.Bits())
	}
	return n
}

// String writes the ranges as the flag takes them.
func String(ranges []netip.Prefix) string {
	s := make([]string, len(ranges))
	for i, r := range ranges {
		s[i] = r.String()
	}
	return strings.Join(s, ",")
}
