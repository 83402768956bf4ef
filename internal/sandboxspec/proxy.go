package sandboxspec

import (
	"net/netip"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/egress"
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
	// proxyEntrypoint starts squid with the configuration the controller
	// rendered, and takes a new one in place (docker/egress-proxy).
	proxyEntrypoint = "/usr/local/bin/afe-egress-squid"
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

// Allowlist is what a sandbox's proxy admits: the policy (internal/egress)
// of the sandbox's hosts and the controller's flags, and its rendering,
// squid's configuration, named by its ID. The proxy is created with it
// (Env), and given it again, in place, when it changes: Request is the
// line the controller writes to the proxy's stdin for that
// (docker.Engine.Tell), Taken tells the proxy's answer. Its --admits says
// the ID it runs with.
type Allowlist struct {
	Policy egress.Policy
	egress.Config
}

// Env is the environment of a proxy created admitting the allowlist; none
// for the zero Allowlist (not rendered).
func (a Allowlist) Env() []string {
	if a.Text == "" {
		return nil
	}
	return a.Config.Env(a.Policy)
}

// ProxyAllowlist is the allowlist of the sandbox's proxy. An error when
// the spec holds an entry that is not a host name (admission and Validate
// refuse it before) or the controller a denied address that is not one:
// the renderer checks them again, whatever came before.
func ProxyAllowlist(sbx *afev1.Sandbox, opts ProxyOptions) (Allowlist, error) {
	entries := make([]string, len(sbx.Spec.Egress))
	for i, h := range sbx.Spec.Egress {
		entries[i] = string(h)
	}
	hosts, err := egress.ParseHosts(entries)
	if err != nil {
		return Allowlist{}, err
	}
	deny, err := egress.ParseDenied(opts.DenyIPs)
	if err != nil {
		return Allowlist{}, err
	}
	p := egress.Policy{Hosts: hosts, AllowPrivate: opts.AllowPrivate, DenyIPs: deny}
	c, err := p.Render()
	if err != nil {
		return Allowlist{}, err
	}
	return Allowlist{Policy: p, Config: c}, nil
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
func NoHosts(opts ProxyOptions) (Allowlist, error) {
	return ProxyAllowlist(&afev1.Sandbox{}, opts)
}

// proxy is the proxy container of the name on the network, with the labels
// of its owner and the allowlist.
func proxy(name, network string, labels map[string]string, resources afev1.SandboxResources, opts ProxyOptions, allow Allowlist) enginespec.ContainerSpec {
	c := enginespec.ContainerSpec{
		Name:  name,
		Image: opts.Image,
		// Named, although it is the image's: a proxy made by a controller
		// whose entrypoint rendered squid's rules from variables (before
		// internal/egress) has another spec-hash, and is recreated on the
		// upgrade rather than left to miss its first change in place.
		Entrypoint:      []string{proxyEntrypoint},
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
	c.Env = allow.Env()
	c.Labels = labels
	return c
}

// ProxyAdmits is the command that prints the allowlist ID a proxy runs
// with.
func ProxyAdmits() []string { return []string{proxyEntrypoint, "--admits"} }
