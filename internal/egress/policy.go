// Package egress is the typed model of what a sandbox's egress proxy
// admits, and the one place where it becomes squid's configuration.
//
// A Policy holds the hosts the sandbox may reach (each a name, whether its
// subdomains pass, and its own rules), whether private destinations pass
// (--egress-allow-private) and the addresses always refused (the engine
// host's). Render writes squid's configuration from it; the proxy's
// entrypoint (docker/egress-proxy) only checks the text's frame and starts
// squid with it. Nothing a tenant writes reaches that text but host names
// that Render validated itself, whatever admission did before it.
//
// A new kind of rule goes into Policy (for all hosts) or HostRules (for one
// host), into Render (render.go), and into the tests of both: see
// docs/architecture.md.
package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// MaxHosts is how many hosts a Policy may hold (the CRD's bound).
const MaxHosts = 64

// Host is one destination a sandbox may reach through its proxy.
type Host struct {
	// Name is a lower-case DNS name of two labels or more, without a
	// leading or trailing dot.
	Name string
	// Subdomains admits the names under Name too (the CRD's leading-dot
	// form, ".example.com").
	Subdomains bool
	// Rules are what the proxy does with requests to this host beyond
	// admitting them.
	Rules HostRules
}

// HostRules are the rules of one allowed host beyond its admission. None
// yet: a header the proxy adds to each request to the host (issue 52's
// credentials) is one, rendered by Render after the host's admission.
type HostRules struct{}

// Policy is what one proxy admits.
type Policy struct {
	// Hosts are the allowed destinations, in the order declared; none
	// admits nothing (a warm pool member's proxy before its claim).
	Hosts []Host
	// AllowPrivate lets destinations in private, loopback and link-local
	// ranges through (--egress-allow-private).
	AllowPrivate bool
	// DenyIPs are refused whatever AllowPrivate: the engine host's
	// addresses (internal/hostaddrs).
	DenyIPs []netip.Prefix
}

// ParseHost reads an egress entry as the CRD writes it: "example.com", or
// ".example.com" for the domain and its subdomains. It refuses anything
// that is not such a name (CheckName).
func ParseHost(entry string) (Host, error) {
	name, sub := strings.CutPrefix(entry, ".")
	h := Host{Name: name, Subdomains: sub}
	if err := h.Check(); err != nil {
		return Host{}, err
	}
	return h, nil
}

// Check is nil when the host may be given to squid: its name passes
// CheckName and its entry (Entry) has 4 to 253 characters, the CRD's
// bounds.
func (h Host) Check() error {
	if err := CheckName(h.Name); err != nil {
		return fmt.Errorf("egress entry %q: %w", h.Entry(), err)
	}
	if n := len(h.Entry()); n < 4 || n > 253 {
		return fmt.Errorf("egress entry %q: %w", h.Entry(), errNameLength)
	}
	return nil
}

// Entry is the host as the CRD writes it, and as squid's dstdomain takes
// it: a leading dot for Subdomains.
func (h Host) Entry() string {
	if h.Subdomains {
		return "." + h.Name
	}
	return h.Name
}

// ParseHosts reads the CRD's entries in order (ParseHost).
func ParseHosts(entries []string) ([]Host, error) {
	hosts := make([]Host, 0, len(entries))
	for _, e := range entries {
		h, err := ParseHost(e)
		if err != nil {
			return nil, err
		}
		hosts = append(hosts, h)
	}
	return hosts, nil
}

// Entries are the hosts as the CRD writes them, in order.
func (p Policy) Entries() []string {
	out := make([]string, len(p.Hosts))
	for i, h := range p.Hosts {
		out[i] = h.Entry()
	}
	return out
}

// ParseDenied reads addresses and ranges ("172.17.0.1", "10.1.0.0/16",
// "fd00::/8") as internal/hostaddrs lists them.
func ParseDenied(list []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(list))
	for _, s := range list {
		var p netip.Prefix
		var err error
		if strings.Contains(s, "/") {
			p, err = netip.ParsePrefix(s)
		} else {
			var a netip.Addr
			if a, err = netip.ParseAddr(s); err == nil && a.Zone() == "" {
				p = netip.PrefixFrom(a, a.BitLen())
			}
		}
		if err != nil || !p.IsValid() {
			return nil, fmt.Errorf("denied address %q is not an IP address or CIDR", s)
		}
		out = append(out, p)
	}
	return out, nil
}

// Errors of CheckName.
var (
	errNameLength = errors.New("an egress entry has 4 to 253 characters")
	errNameForm   = errors.New("not a lower-case host name of two labels or more (IP literals, wildcards, ports, schemes, spaces and anything else are refused)")
)

// CheckName is nil when name is a lower-case DNS name squid may be given
// as a word of its configuration: two labels or more of [a-z0-9-], each 1
// to 63 characters, neither starting nor ending with a dash, the last
// starting with a letter (so never an IP literal), 253 characters at
// most. Written by hand, not with the CRD's pattern, so that the renderer
// does not rest on admission's code: the tests hold the two to each other.
func CheckName(name string) error {
	if len(name) > 253 {
		return errNameLength
	}
	labels := strings.Split(name, ".")
	if len(labels) < 2 {
		return errNameForm
	}
	for _, l := range labels {
		if !label(l) {
			return errNameForm
		}
	}
	if last := labels[len(labels)-1]; last[0] < 'a' || last[0] > 'z' {
		return errNameForm
	}
	return nil
}

// label is true for 1 to 63 characters of [a-z0-9-], neither first nor
// last a dash.
func label(l string) bool {
	if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
		return false
	}
	for i := 0; i < len(l); i++ {
		c := l[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}
