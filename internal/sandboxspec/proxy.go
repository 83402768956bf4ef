package sandboxspec

import (
	"net/netip"
	"strings"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/enginespec"
	"afe.dev/sandbox/internal/naming"
)

const (
	// ProxyAlias is the proxy's name on a sandbox's internal network: its
	// network alias there, and the name the sandbox's /etc/hosts gives its
	// address (Resolved.ProxyAddress). Each sandbox has its own network, so
	// the name is unique there.
	ProxyAlias = "afe-proxy"
	// ProxyPort is where squid listens.
	ProxyPort = "3128"
	// ProxyURL is what the sandbox's proxy variables point at.
	ProxyURL = "http://" + ProxyAlias + ":" + ProxyPort
	// ProxyProbe exits 0 when squid answers.
	ProxyProbe = "/usr/local/bin/afe-proxy-probe"
	// proxyEntrypoint renders squid's rules (docker/egress-proxy).
	proxyEntrypoint = "/usr/local/bin/afe-egress-proxy"
	// proxyUser is the proxy image's non-root user.
	proxyUser = "proxy"
)

// NoDNS is the upstream resolver of a sandbox with egress: its own loopback,
// where nothing answers. The engine's embedded resolver still answers the
// names of the internal network (the proxy), but forwards every other
// question to this address inside the sandbox's network namespace, so DNS is
// no way out, also on engines before 26 that forward lookups from internal
// networks (CVE-2024-29018). An explicit --dns also keeps the engine from
// using the host's resolv.conf, whose loopback resolvers it would query from
// the host's namespace.
var NoDNS = []string{"127.0.0.1"}

// ProxyOptions are the controller's egress settings.
type ProxyOptions struct {
	Image         string
	EgressNetwork string
	AllowPrivate  bool
	// DenyIPs are addresses of the engine host, always refused.
	DenyIPs []string
	// Address is the proxy's fixed address on the sandbox's network
	// (ProxyAddress of a block of --egress-subnets), or "" for the
	// engine's choice (a network of the engine's own pools, which takes
	// no fixed address).
	Address string
}

// ProxyAddress is the proxy's fixed address in a sandbox's network of
// the subnet (a block of --egress-subnets): the first after the gateway's,
// which the engine reserves; "" for a subnet too small to hold the
// gateway, the proxy and a sandbox (or not IPv4).
func ProxyAddress(subnet string) string {
	p, err := netip.ParsePrefix(subnet)
	if err != nil || !p.Addr().Is4() || p.Bits() > 29 {
		return ""
	}
	a := p.Masked().Addr().Next().Next()
	return a.String()
}

// SandboxAddress is the sandbox's fixed address beside a proxy's fixed
// one (ProxyAddress): the next. Both are fixed, so that neither can take
// the other's, whichever the engine attaches first ("" for "").
func SandboxAddress(proxy string) string {
	a, err := netip.ParseAddr(proxy)
	if err != nil || !a.Is4() {
		return ""
	}
	return a.Next().String()
}

// Network is the internal network of a sandbox with egress; the host has no
// address on it.
func Network(id Identity) enginespec.NetworkSpec {
	return enginespec.NetworkSpec{
		Name:          naming.Network(id.Key),
		Labels:        id.Labels(afev1.RoleNetwork),
		Internal:      true,
		NoHostAddress: true,
	}
}

// ProxyEnvFor is the proxy variables of a sandbox with egress.
func ProxyEnvFor() []string {
	return []string{
		"HTTP_PROXY=" + ProxyURL, "HTTPS_PROXY=" + ProxyURL,
		"http_proxy=" + ProxyURL, "https_proxy=" + ProxyURL,
	}
}

// Allowlist is what a sandbox's proxy admits: the variables its
// entrypoint renders squid's rules from (the hosts, whether private
// destinations pass, the engine host's addresses it refuses) and ID, a hash
// of them. The proxy is created with them, and given them again, in place,
// when they change: Request is the line the controller writes to the
// proxy's stdin for that (docker.Engine.Tell), Taken tells the proxy's
// answer. Its --admits says the ID it runs with.
type Allowlist struct {
	Env []string
	ID  string
	// hosts and denyIPs are the comma-separated lists, private 0 or 1.
	hosts, private, denyIPs string
}

// ProxyAllowlist is the allowlist of the sandbox's proxy.
func ProxyAllowlist(sbx *afev1.Sandbox, opts ProxyOptions) Allowlist {
	hosts := make([]string, 0, len(sbx.Spec.Egress))
	for _, h := range sbx.Spec.Egress {
		hosts = append(hosts, string(h))
	}
	a := Allowlist{hosts: strings.Join(hosts, ","), private: "0", denyIPs: strings.Join(opts.DenyIPs, ",")}
	if opts.AllowPrivate {
		a.private = "1"
	}
	env := []string{
		"AFE_EGRESS_HOSTS=" + a.hosts,
		"AFE_EGRESS_ALLOW_PRIVATE=" + a.private,
		"AFE_EGRESS_DENY_IPS=" + a.denyIPs,
	}
	a.ID = naming.Hash(strings.Join(env, "\n"))
	env = append(env, "AFE_EGRESS_ALLOWLIST_ID="+a.ID)
	a.Env = env
	return a
}

// Request is the line that gives a running proxy the allowlist in place,
// read from its stdin by its entrypoint: "afe-allowlist NONCE ID PRIVATE
// HOSTS DENY_IPS", an empty list as "-". The nonce (lower-case hex, fresh
// for each request) is in the answer, so that no other line of the
// proxy's output (squid's, which a workload's requests may shape) can pass
// for it. The entrypoint validates every field again.
func (a Allowlist) Request(nonce string) string {
	orDash := func(list string) string {
		if list == "" {
			return "-"
		}
		return list
	}
	return strings.Join([]string{"afe-allowlist", nonce, a.ID, a.private, orDash(a.hosts), orDash(a.denyIPs)}, " ")
}

// Answered tells whether a line of the proxy's stderr answers the request
// of the nonce, and Taken whether it says the allowlist was taken.
func (a Allowlist) Answered(nonce, line string) bool {
	return a.Taken(nonce, line) || line == "afe-egress-proxy: allowlist refused "+nonce
}

// Taken tells whether the line is the proxy's answer that it admits the
// allowlist, to the request of the nonce.
func (a Allowlist) Taken(nonce, line string) bool {
	return line == "afe-egress-proxy: allowlist "+a.ID+" taken "+nonce
}

// Proxy is the hardened egress proxy container of a sandbox: squid as the
// image's non-root user, every capability dropped, no-new-privileges, a
// read-only root with a small /tmp, memory and pids limits, under runc
// whatever the sandbox's runtime: squid resolves the allowed names with
// the engine's embedded DNS, which a runtime with its own network stack
// (gVisor's) does not reach (docs/security.md). It sits on the sandbox's
// internal network (as ProxyAlias, at opts.Address when set) and on the
// egress network. It starts admitting allow; its
// spec-hash leaves the allowlist out, which changes in place.
func Proxy(sbx *afev1.Sandbox, id Identity, opts ProxyOptions, allow Allowlist) enginespec.ContainerSpec {
	return proxy(naming.Proxy(id.Key), naming.Network(id.Key), id.Labels(afev1.RoleProxy), sbx.Spec.Resources, opts, allow)
}

// MemberNetwork is the internal network of a warm pool member whose
// template has egress, labelled as the member's.
func MemberNetwork(m MemberIdentity) enginespec.NetworkSpec {
	return enginespec.NetworkSpec{
		Name:          naming.MemberNetwork(m.Name),
		Labels:        m.Labels(afev1.RoleNetwork),
		Internal:      true,
		NoHostAddress: true,
	}
}

// MemberProxy is the proxy of a warm pool member whose template has
// egress: Proxy's container on the member's network, named and labelled
// as the member's. A member's proxy admits NoHosts until a Sandbox claims
// the member; the claim gives it the Sandbox's allowlist in place.
func MemberProxy(spec *afev1.SandboxTemplateSpec, m MemberIdentity, opts ProxyOptions, allow Allowlist) enginespec.ContainerSpec {
	return proxy(naming.MemberProxy(m.Name), naming.MemberNetwork(m.Name), m.Labels(afev1.RoleProxy), spec.Resources, opts, allow)
}

// NoHosts is the allowlist that admits nothing: a pool member's proxy's
// before its claim.
func NoHosts(opts ProxyOptions) Allowlist {
	return ProxyAllowlist(&afev1.Sandbox{}, opts)
}

// proxy is the proxy container of the name on the network, with the labels
// of its owner and the allowlist.
func proxy(name, network string, labels map[string]string, resources afev1.SandboxResources, opts ProxyOptions, allow Allowlist) enginespec.ContainerSpec {
	c := enginespec.ContainerSpec{
		Name:            name,
		Image:           opts.Image,
		User:            proxyUser,
		Network:         network,
		Aliases:         []string{ProxyAlias},
		IPv4Address:     opts.Address,
		ExtraNetworks:   []string{opts.EgressNetwork},
		NanoCPUs:        500_000_000,
		MemoryBytes:     256 << 20,
		PidsLimit:       128,
		CapDrop:         []string{"ALL"},
		NoNewPrivileges: true,
		ReadOnlyRootfs:  true,
		Tmpfs:           map[string]string{"/tmp": "rw,noexec,nosuid,size=16m"},
		Init:            true,
		// The controller's allowlist requests (Allowlist.Request).
		OpenStdin: true,
		Log:       ProxyLog(resources),
	}
	applyRuntime(&c, enginespec.Runtime{Name: DefaultRuntime})
	labels[afev1.LabelSpecHash] = Hash(c)
	labels[afev1.LabelAllowlist] = allow.ID
	c.Env = allow.Env
	c.Labels = labels
	return c
}

// ProxyAdmits is the command that prints the allowlist ID a proxy runs
// with.
func ProxyAdmits() []string { return []string{proxyEntrypoint, "--admits"} }
