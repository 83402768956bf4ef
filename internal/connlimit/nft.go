package connlimit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
)

// nftPath is the host's nft command: on PATH, or where Debian puts it.
func nftPath() string {
	if p, err := exec.LookPath("nft"); err == nil {
		return p
	}
	return "/usr/sbin/nft"
}

// Nft runs nft in the engine host's network namespace with the arguments
// and the script on its stdin, and returns its output.
type Nft func(ctx context.Context, script string, args ...string) ([]byte, error)

// LocalNft is the host's nft run by this process: the engine host's
// namespace when this process runs there as root (make run).
func LocalNft(ctx context.Context, script string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, nftPath(), args...)
	cmd.Stdin = strings.NewReader(script)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("nft %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// listed is the part of `nft -j list set` read here.
type listed struct {
	Nftables []struct {
		Set *struct {
			Elem []json.RawMessage `json:"elem"`
		} `json:"set"`
	} `json:"nftables"`
}

// parseElements reads the elements of a set from `nft -j list set`: an
// address is a string, a prefix an object {"prefix": {"addr", "len"}};
// each is returned as Canonical makes it.
func parseElements(out []byte) ([]string, error) {
	var l listed
	if err := json.Unmarshal(out, &l); err != nil {
		return nil, fmt.Errorf("read nft's listing: %w", err)
	}
	var elems []string
	for _, obj := range l.Nftables {
		if obj.Set == nil {
			continue
		}
		for _, raw := range obj.Set.Elem {
			e, err := parseElement(raw)
			if err != nil {
				return nil, err
			}
			elems = append(elems, e)
		}
	}
	return elems, nil
}

func parseElement(raw json.RawMessage) (string, error) {
	var addr string
	if err := json.Unmarshal(raw, &addr); err == nil {
		return Canonical(addr)
	}
	var p struct {
		Prefix struct {
			Addr string `json:"addr"`
			Len  int    `json:"len"`
		} `json:"prefix"`
	}
	if err := json.Unmarshal(raw, &p); err != nil || p.Prefix.Addr == "" {
		return "", fmt.Errorf("unexpected element in nft's listing: %s", raw)
	}
	return Canonical(p.Prefix.Addr + "/" + strconv.Itoa(p.Prefix.Len))
}

// Canonical is an IPv4 address or prefix as the table holds it (a prefix
// masked to its network, an address alone); an error for anything else,
// IPv6 included.
func Canonical(s string) (string, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil || !p.Addr().Is4() {
			return "", fmt.Errorf("%q is not an IPv4 prefix", s)
		}
		if p.Bits() == 32 {
			return p.Addr().String(), nil
		}
		return p.Masked().String(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is4() {
		return "", fmt.Errorf("%q is not an IPv4 address", s)
	}
	return a.String(), nil
}
