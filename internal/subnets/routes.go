package subnets

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/bits"
	"net/netip"
	"strings"
)

// RoutesFile is where Linux lists the host's IPv4 routes.
const RoutesFile = "/proc/net/route"

// ParseRoutes reads the host's IPv4 routes in the format of RoutesFile
// (addresses in hexadecimal, in the host's little-endian byte order), the
// default route left out.
func ParseRoutes(text string) ([]Named, error) {
	var out []Named
	for i, line := range strings.Split(strings.TrimSpace(text), "\n") {
		f := strings.Fields(line)
		if i == 0 || len(f) == 0 {
			continue // the header
		}
		if len(f) < 8 {
			return nil, fmt.Errorf("%s line %d: %d fields", RoutesFile, i+1, len(f))
		}
		dst, err := leAddr(f[1])
		if err != nil {
			return nil, fmt.Errorf("%s line %d: destination: %w", RoutesFile, i+1, err)
		}
		mask, err := leAddr(f[7])
		if err != nil {
			return nil, fmt.Errorf("%s line %d: mask: %w", RoutesFile, i+1, err)
		}
		m := binary.BigEndian.Uint32(mask[:])
		n := bits.OnesCount32(m)
		if m != ^uint32(0)<<(32-n) && n != 0 {
			return nil, fmt.Errorf("%s line %d: mask %s is not contiguous", RoutesFile, i+1, f[7])
		}
		if n == 0 {
			continue
		}
		p := netip.PrefixFrom(netip.AddrFrom4(dst), n).Masked()
		out = append(out, Named{Prefix: p, What: "the host's route on " + f[0]})
	}
	return out, nil
}

// leAddr reads an IPv4 address written as 8 hex digits, least significant
// byte first.
func leAddr(s string) ([4]byte, error) {
	var a [4]byte
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 4 {
		return a, fmt.Errorf("%q is not 8 hex digits", s)
	}
	return [4]byte{b[3], b[2], b[1], b[0]}, nil
}
