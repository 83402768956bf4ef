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

// Proxy is the hardened egress proxy container of a sandbox: squid as the
// image's non-root user, every capability dropped, no-new-privileges, a
// read-only root with a small /tmp, memory and pids limits, under the
// sandbox's runtime. It sits on the
// sandbox's internal network (as ProxyAlias) and on the egress network.
func Proxy(sbx *afev1.Sandbox, id Identity, opts ProxyOptions) enginespec.ContainerSpec {
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
	}
	c := enginespec.ContainerSpec{
		Name:            naming.Proxy(id.Key),
		Image:           opts.Image,
		User:            proxyUser,
		Env:             env,
		Network:         naming.Network(id.Key),
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
		Log:             ProxyLog(sbx.Spec.Resources),
	}
	applyRuntime(&c, opts.Runtime)
	labels := id.Labels(afev1.RoleProxy)
	// The host's addresses are not hashed: they come and go with the
	// engine's networks, and a proxy that refuses an address no longer the
	// host's is kept (ProxyDeniesAll), not recreated with its connections.
	labels[afev1.LabelSpecHash] = Hash(c)
	if len(opts.DenyIPs) > 0 {
		list := strings.Join(opts.DenyIPs, ",")
		c.Env = append(c.Env, "AFE_EGRESS_DENY_IPS="+list)
		labels[afev1.LabelDenyIPs] = list
	}
	c.Labels = labels
	return c
}

// ProxyDeniesAll reports whether a proxy made with the labels have refuses
// every address the proxy want would (afe.deny-ips): a proxy that does is
// up to date whatever else its list holds.
func ProxyDeniesAll(have, want map[string]string) bool {
	held := map[string]bool{}
	for _, a := range strings.Split(have[afev1.LabelDenyIPs], ",") {
		held[a] = true
	}
	for _, a := range strings.Split(want[afev1.LabelDenyIPs], ",") {
		if a != "" && !held[a] {
			return false
		}
	}
	return true
}
