package sandboxspec

import (
	"strings"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/enginespec"
	"afe.dev/sandbox/internal/naming"
)

const (
	// ProxyAlias is the proxy's name on a sandbox's internal network. Each
	// sandbox has its own network, so the name is unique there, and it keeps
	// resolving to the proxy when the proxy is recreated with a new address.
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
	// Runtime is the sandbox's runtime: squid, which parses what the
	// workload sends, runs under the same kernel boundary as the workload
	// (docs/security.md). A zero one is the engine's default.
	Runtime enginespec.Runtime
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
// when they change (afe-egress-proxy --reload, an exec of the controller's
// in the proxy's container); its --admits says the ID it runs with.
type Allowlist struct {
	Env []string
	ID  string
}

// ProxyAllowlist is the allowlist of the sandbox's proxy.
func ProxyAllowlist(sbx *afev1.Sandbox, opts ProxyOptions) Allowlist {
	hosts := make([]string, 0, len(sbx.Spec.Egress))
	for _, h := range sbx.Spec.Egress {
		hosts = append(hosts, string(h))
	}
	private := "0"
	if opts.AllowPrivate {
		private = "1"
	}
	env := []string{
		"AFE_EGRESS_HOSTS=" + strings.Join(hosts, ","),
		"AFE_EGRESS_ALLOW_PRIVATE=" + private,
		"AFE_EGRESS_DENY_IPS=" + strings.Join(opts.DenyIPs, ","),
	}
	id := naming.Hash(strings.Join(env, "\n"))
	return Allowlist{Env: append(env, "AFE_EGRESS_ALLOWLIST_ID="+id), ID: id}
}

// Proxy is the hardened egress proxy container of a sandbox: squid as the
// image's non-root user, every capability dropped, no-new-privileges, a
// read-only root with a small /tmp, memory and pids limits, under the
// sandbox's runtime. It sits on the sandbox's internal network (as
// ProxyAlias) and on the egress network. It starts admitting allow; its
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
		ExtraNetworks:   []string{opts.EgressNetwork},
		NanoCPUs:        500_000_000,
		MemoryBytes:     256 << 20,
		PidsLimit:       128,
		CapDrop:         []string{"ALL"},
		NoNewPrivileges: true,
		ReadOnlyRootfs:  true,
		Tmpfs:           map[string]string{"/tmp": "rw,noexec,nosuid,size=16m"},
		Init:            true,
		Log:             ProxyLog(resources),
	}
	applyRuntime(&c, opts.Runtime)
	labels[afev1.LabelSpecHash] = Hash(c)
	labels[afev1.LabelAllowlist] = allow.ID
	c.Env = allow.Env
	c.Labels = labels
	return c
}

// ProxyReload is the command that gives a running proxy the allowlist in
// the exec's environment (Allowlist.Env), in place; it prints the ID.
func ProxyReload() []string { return []string{proxyEntrypoint, "--reload"} }

// ProxyAdmits is the command that prints the allowlist ID a proxy runs
// with.
func ProxyAdmits() []string { return []string{proxyEntrypoint, "--admits"} }
