package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"afe.dev/sandbox/internal/hostaddrs"
	"afe.dev/sandbox/internal/naming"
)

// Paths of squid's files in the proxy's container (its /tmp, the only
// place it may write).
const (
	// ConfigPath is the configuration squid reads, at its start and at
	// each reconfiguration.
	ConfigPath = "/tmp/squid.conf"
	pidPath    = "/tmp/squid.pid"
)

// The reasons of a denial, each the annotation (squid's note afe_why) of
// the rule that denied: the audit reads them back (internal/egresslog).
const (
	// ReasonPort: CONNECT to a port other than 443, or plain HTTP to one
	// other than 80.
	ReasonPort = "port"
	// ReasonHost: the host is not on the allowlist.
	ReasonHost = "host"
	// ReasonAddress: the host resolves to an address always refused (the
	// engine host's).
	ReasonAddress = "address"
	// ReasonPrivate: the host resolves to a private, loopback or
	// link-local address.
	ReasonPrivate = "private"
	// ReasonNothing: the allowlist is empty.
	ReasonNothing = "nothing"
)

// Reasons are every reason a rule of Render annotates.
var Reasons = []string{ReasonPort, ReasonHost, ReasonAddress, ReasonPrivate, ReasonNothing}

// LogPrefix starts every decision line squid logs (the logformat afe):
// internal/egresslog reads them.
const LogPrefix = "afe-egress v1 "

// Header and Trailer frame a rendered configuration: its first line is
// Header and the ID, its last Trailer and the ID. The proxy takes a text
// only whole (both lines, of one ID): a text cut anywhere is refused.
const (
	Header  = "# afe-allowlist "
	Trailer = "# afe-allowlist-end "
)

// MaxLine is the longest line squid 5.7 reads whole: it reads its
// configuration with fgets into BUFSIZ (8192) bytes; the rest of a longer
// line is read as a line of its own. Render writes one entry a line (282
// characters at most), whatever the list's length.
const MaxLine = 8191

// Config is a rendered configuration.
type Config struct {
	// Text is squid's configuration, framed (Header, Trailer): printable
	// ASCII lines, none empty, each ending with a newline.
	Text string
	// ID names it: a hash of what the frame holds, which the proxy's
	// --admits says and the proxy's label afe.allowlist records.
	ID string
}

var errTooManyHosts = fmt.Errorf("more than %d egress hosts", MaxHosts)

// Render writes squid's configuration for the policy. It refuses a host
// that is not a valid name (Host.Check), one listed twice, more than
// MaxHosts, and a denied prefix that is not valid: whatever the caller
// validated before, nothing but the fixed directives and checked names and
// addresses can reach the text.
func (p Policy) Render() (Config, error) {
	if len(p.Hosts) > MaxHosts {
		return Config{}, errTooManyHosts
	}
	seen := make(map[string]bool, len(p.Hosts))
	for _, h := range p.Hosts {
		if err := h.Check(); err != nil {
			return Config{}, err
		}
		if seen[h.Entry()] {
			return Config{}, fmt.Errorf("egress entry %q is listed twice", h.Entry())
		}
		seen[h.Entry()] = true
	}
	for _, d := range p.DenyIPs {
		if !d.IsValid() {
			return Config{}, errors.New("a denied prefix is not valid")
		}
	}
	var b strings.Builder
	b.WriteString(fixed)
	p.writeRules(&b)
	body := b.String()
	id := naming.Hash(body)
	return Config{Text: Header + id + "\n" + body + Trailer + id + "\n", ID: id}, nil
}

// writeRules writes the access rules. Each denying rule ends with the
// annotation of its reason (an ACL that always matches, reached only when
// the rule's others did). ACLs take one entry a line (the lines of one ACL
// add up), so that no line nears MaxLine.
func (p Policy) writeRules(b *strings.Builder) {
	if len(p.Hosts) == 0 {
		b.WriteString("http_access deny all afe_why_" + ReasonNothing + "\n")
		return
	}
	for _, h := range p.Hosts {
		// -n: squid compares the name as the request gives it, never a
		// name it would look up for an address.
		b.WriteString("acl afe_allowed dstdomain -n " + h.Entry() + "\n")
	}
	for _, d := range p.DenyIPs {
		b.WriteString("acl afe_host dst " + prefix(d) + "\n")
	}
	b.WriteString("http_access deny afe_connect !afe_tls afe_why_port\n")
	b.WriteString("http_access deny !afe_connect !afe_http afe_why_port\n")
	b.WriteString("http_access deny !afe_allowed afe_why_host\n")
	if len(p.DenyIPs) > 0 {
		b.WriteString("http_access deny afe_host afe_why_address\n")
	}
	if !p.AllowPrivate {
		b.WriteString("http_access deny afe_private afe_why_private\n")
	}
	b.WriteString("http_access allow afe_allowed\n")
	b.WriteString("http_access deny all\n")
}

// prefix is a denied prefix as squid's dst takes it: a single address
// without its /32 or /128.
func prefix(p netip.Prefix) string {
	if p.IsSingleIP() {
		return p.Addr().String()
	}
	return p.String()
}

// fixed is the part of the configuration no policy changes.
//
// Memory: one proxy per sandbox, so as little as squid will run in
// (docs/troubleshooting.md has the figures). No memory pools kept after
// use, no per-client statistics, small name caches, and a descriptor table
// for 1024 rather than the container's limit (half of them connections).
//
// tls_outgoing_options default-ca=off: squid's own TLS client (https://
// URLs in plain requests, TLS peers) is never used: such requests are
// refused above port 80. Without the default CAs squid does not parse the
// system bundle at start: 3.8 MiB less resident heap (anonymous 10.4 ->
// 6.6 MiB, measured idle, squid 5.7). Should squid ever originate TLS, it
// would fail verification, closed.
//
// mime_table /dev/null: the MIME table only serves FTP listings (FTP is
// refused: plain requests go to port 80 only) and loads its 52 icons into
// memory at start: 1.4 MiB less (anonymous 6.6 -> 5.2 MiB). Both together:
// squid 22.9 -> 17.4 MiB resident, 10.4 -> 5.2 MiB of it anonymous, the
// rest file pages (binary and libraries) that fuse-overlayfs keeps private
// per container. Not worth it, measured one at a time (under 0.2 MiB
// each): fewer descriptors (256, 128), smaller name caches, hosts_file
// none, store_avg_object_size, memory_cache_mode,
// maximum_object_size_in_memory, digest_generation, workers 1, persistent
// connections or half-closed clients off, MALLOC_ARENA_MAX=1 and glibc
// malloc tunables. What is left of the heap is, by size and count, mostly
// squid's statistics histograms (1071 chunks of 2.4 KiB, compiled in).
//
// logformat afe: one line per decision, read by the controller
// (internal/egresslog): the fields before the method are squid's own; the
// method and the URL are the workload's words, URL-escaped by squid (no
// space, control character or newline) and last, so that they can never
// be read as another field or another line. why= is the afe_why
// annotation of the rule that denied.
var fixed = strings.Join([]string{
	"http_port 3128",
	"icp_port 0",
	"htcp_port 0",
	"snmp_port 0",
	"pid_filename " + pidPath,
	"netdb_filename none",
	"pinger_enable off",
	"coredump_dir /tmp",
	"cache deny all",
	"cache_mem 0 MB",
	"memory_pools off",
	"client_db off",
	"ipcache_size 128",
	"fqdncache_size 128",
	"max_filedescriptors 1024",
	"tls_outgoing_options default-ca=off",
	"mime_table /dev/null",
	"via off",
	"forwarded_for delete",
	"httpd_suppress_version_string on",
	"shutdown_lifetime 1 seconds",
	"logformat afe " + LogPrefix + "time=%ts.%03tu ms=%tr client=%>a status=%Ss/%03>Hs why=%{afe_why}note up=%>st down=%<st method=%#rm url=%#ru",
	"access_log stdio:/dev/stdout afe",
	"cache_log stdio:/dev/stderr",
	"acl afe_connect method CONNECT",
	"acl afe_tls port 443",
	"acl afe_http port 80",
	"acl afe_why_" + ReasonPort + " annotate_transaction afe_why=" + ReasonPort,
	"acl afe_why_" + ReasonHost + " annotate_transaction afe_why=" + ReasonHost,
	"acl afe_why_" + ReasonAddress + " annotate_transaction afe_why=" + ReasonAddress,
	"acl afe_why_" + ReasonPrivate + " annotate_transaction afe_why=" + ReasonPrivate,
	"acl afe_why_" + ReasonNothing + " annotate_transaction afe_why=" + ReasonNothing,
	"acl afe_private dst " + privateRanges(),
}, "\n") + "\n"

// privateRanges are the ranges refused without AllowPrivate:
// hostaddrs.PrivateRanges, which the manager leaves out of DenyIPs.
func privateRanges() string {
	out := make([]string, len(hostaddrs.PrivateRanges))
	for i, p := range hostaddrs.PrivateRanges {
		out[i] = p.String()
	}
	return strings.Join(out, " ")
}
