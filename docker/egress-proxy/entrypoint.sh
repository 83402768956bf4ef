#!/bin/sh
# afe egress proxy: validates its allowlist strictly (defence in depth behind
# admission and the controller), writes squid.conf and runs squid in the
# foreground as the user it was started as (never root).
#
#   AFE_EGRESS_HOSTS          comma-separated host names; ".example.com" means
#                             the domain and its subdomains; empty admits
#                             nothing (a warm pool's proxy before its claim)
#   AFE_EGRESS_ALLOW_PRIVATE  1 lets destinations in private, loopback and
#                             link-local ranges through (default 0)
#   AFE_EGRESS_DENY_IPS       comma-separated IPv4 or IPv6 addresses or CIDRs
#                             always refused, whatever AFE_EGRESS_ALLOW_PRIVATE
#                             (the engine host's addresses)
#   AFE_EGRESS_ALLOWLIST_ID   the controller's name for this configuration (a
#                             hash of it, lower-case hex), said by --admits
#
# With --render it only prints the configuration. With --reload (the
# variables above in its environment) it replaces the running squid's
# configuration and has squid read it again: connections in flight go on,
# new requests meet the new rules. With --admits it prints the
# AFE_EGRESS_ALLOWLIST_ID squid runs with.
#
# The controller changes the allowlist of a running proxy through the
# container's stdin, which the engine holds open and only a client of the
# engine's API can write (the workload reaches squid's port only), one
# request a line:
#
#   afe-allowlist NONCE ID PRIVATE HOSTS DENY_IPS
#
# NONCE is the controller's, lower-case hex; ID, PRIVATE, HOSTS and DENY_IPS
# are the variables above, "-" for an empty list. The request does what
# --reload does and is answered on stderr with its nonce, "afe-egress-proxy: allowlist ID
# taken NONCE" or "afe-egress-proxy: allowlist refused NONCE"; any other
# line is ignored. An exec costs the engine 100-150 ms here, a line a few.
set -eu

fail() {
	echo "afe-egress-proxy: $*" >&2
	exit 64
}

IP_RE='^([0-9]{1,3}(\.[0-9]{1,3}){3}(/[0-9]{1,2})?|[0-9a-f]{0,4}(:[0-9a-f]{0,4}){2,7}(:[0-9]{1,3}(\.[0-9]{1,3}){3})?(/[0-9]{1,3})?)$'

conf="${TMPDIR:-/tmp}/squid.conf"
pidfile="${TMPDIR:-/tmp}/squid.pid"
if [ "${1:-}" = "--admits" ]; then
	id="$(grep -m1 '^# afe-allowlist ' "${conf}")" || fail "squid has no configuration of the controller's"
	echo "${id#\# afe-allowlist }"
	exit 0
fi

# validate checks hosts, private, deny_ips and allowlist_id and sets allowed
# and denied, the lists split on spaces; it fails (exit 64) at the first
# wrong one. Builtins but for one grep of the addresses (first_bad), none
# when they are those validated before: a change of allowlist runs it in
# the proxy's half a CPU.
validate() {
	case "${private}" in
	0 | 1) ;;
	*) fail "AFE_EGRESS_ALLOW_PRIVATE must be 0 or 1" ;;
	esac
	case "${allowlist_id}" in
	none) ;;
	'' | *[!0-9a-f]*) fail "AFE_EGRESS_ALLOWLIST_ID must be lower-case hex" ;;
	esac
	[ "${#allowlist_id}" -le 64 ] || fail "AFE_EGRESS_ALLOWLIST_ID is longer than 64 characters"
	# Only lower-case letters, digits, dots, dashes and the separating
	# commas: no space, newline, quote, wildcard, port, scheme or path can
	# get through.
	case "${hosts}" in
	*[!a-z0-9.,-]*) fail "AFE_EGRESS_HOSTS may only hold lower-case host names separated by commas" ;;
	,* | *, | *,,*) fail "AFE_EGRESS_HOSTS has an empty entry" ;;
	esac
	case "${deny_ips}" in
	*[!0-9a-f.:/,]*) fail "AFE_EGRESS_DENY_IPS may only hold IP addresses or CIDRs separated by commas" ;;
	esac
	allowed=""
	count=0
	IFS=,
	for h in ${hosts}; do
		count=$((count + 1))
		[ "${count}" -le 64 ] || fail "AFE_EGRESS_HOSTS lists more than 64 hosts"
		[ "${#h}" -ge 4 ] && [ "${#h}" -le 253 ] || fail "egress entry '${h}' has a bad length"
		case " ${allowed} " in
		*" ${h} "*) fail "egress entry '${h}' is listed twice" ;;
		esac
		host_name "${h}" || fail "egress entry '${h}' is not a host name or .domain"
		allowed="${allowed} ${h}"
	done
	denied=""
	for ip in ${deny_ips}; do
		[ -n "${ip}" ] || fail "AFE_EGRESS_DENY_IPS has an empty entry"
		denied="${denied} ${ip}"
	done
	unset IFS
	if [ "${deny_ips}" != "${known_ips:-}" ] && first_bad; then
		fail "AFE_EGRESS_DENY_IPS entry '${bad}' is not an IP address or CIDR"
	fi
}

# host_name NAME is true when NAME, of the characters [a-z0-9.-] only, is a
# host name of two labels or more, or one with a leading dot (the domain
# and its subdomains): each label 1 to 63 characters, neither first nor
# last a dash, the last label's first a letter. Builtins only (a grep of
# the same costs 10 ms in the proxy's half a CPU); the fuzz test holds it
# to the controller's validation.
host_name() {
	name="${1#.}"
	case "${name}" in
	*.*) ;;
	*) return 1 ;;
	esac
	case "${name}" in
	.* | *. | *..* | -* | *- | *-.* | *.-*) return 1 ;;
	esac
	case "${name##*.}" in
	[a-z]*) ;;
	*) return 1 ;;
	esac
	IFS=.
	for label in ${name}; do
		[ "${#label}" -le 63 ] || { IFS=, && return 1; }
	done
	IFS=,
}

# first_bad is true when an address does not have its form, the first such
# in bad: one grep for the list, whatever its length. The entries hold only
# the characters validate checked (no space, newline or glob): split on
# spaces, they are themselves. known_ips is a list validated before (the
# listener's), not checked again.
first_bad() {
	[ -n "${denied}" ] || return 1
	# shellcheck disable=SC2086
	bad="$(printf '%s\n' ${denied} | grep -Ev -m1 -e "${IP_RE}")"
}

# fixed is the part of squid's configuration that no allowlist changes:
# rendered once, so that a change of allowlist writes the file with
# builtins alone (cat costs the proxy's half a CPU 6 ms).
fixed="$(
	cat <<CONF
http_port 3128
icp_port 0
htcp_port 0
snmp_port 0
pid_filename ${pidfile}
netdb_filename none
pinger_enable off
coredump_dir /tmp
cache deny all
cache_mem 0 MB
# Memory: one proxy per sandbox, so as little as squid will run in
# (docs/troubleshooting.md has the figures). No memory pools kept after
# use, no per-client statistics, small name caches, and a descriptor table
# for 1024 rather than the container's limit (half of them connections).
memory_pools off
client_db off
ipcache_size 128
fqdncache_size 128
max_filedescriptors 1024
# squid's own TLS client (https:// URLs in plain requests, TLS peers) is
# never used: such requests are refused above port 80. Without the default
# CAs squid does not parse the system bundle at start: 3.8 MiB less
# resident heap (anonymous 10.4 -> 6.6 MiB, measured idle, squid 5.7). Should
# squid ever originate TLS, it would fail verification, closed.
tls_outgoing_options default-ca=off
# No MIME table: it only serves FTP listings (FTP is refused: plain
# requests go to port 80 only) and loads its 52 icons into memory at start:
# 1.4 MiB less (anonymous 6.6 -> 5.2 MiB). Both together: squid 22.9 -> 17.4
# MiB resident, 10.4 -> 5.2 MiB of it anonymous, the rest file pages
# (binary and libraries) that fuse-overlayfs keeps private per container.
# Not worth it, measured one at a time (under 0.2 MiB each): fewer
# descriptors (256, 128), smaller name caches, hosts_file none,
# store_avg_object_size, memory_cache_mode, maximum_object_size_in_memory,
# digest_generation, workers 1, persistent connections or half-closed
# clients off, MALLOC_ARENA_MAX=1 and glibc malloc tunables. What is left
# of the heap is, by size and count, mostly squid's statistics histograms (1071
# chunks of 2.4 KiB, compiled in).
mime_table /dev/null
via off
forwarded_for delete
httpd_suppress_version_string on
shutdown_lifetime 1 seconds
# One line per decision, read by the controller (internal/egresslog): the
# fields before the method are squid's own; the method and the URL are the
# workload's words, URL-escaped by squid (no space, control character or
# newline) and last, so that they can never be read as another field or
# another line. why= is the afe_why annotation of the rule that denied.
logformat afe afe-egress v1 time=%ts.%03tu ms=%tr client=%>a status=%Ss/%03>Hs why=%{afe_why}note up=%>st down=%<st method=%#rm url=%#ru
access_log stdio:/dev/stdout afe
cache_log stdio:/dev/stderr

acl afe_connect method CONNECT
acl afe_tls port 443
acl afe_http port 80
# Each denying rule ends with the annotation of its reason (an ACL that
# always matches, reached only when the rule's others did).
acl afe_why_port annotate_transaction afe_why=port
acl afe_why_host annotate_transaction afe_why=host
acl afe_why_address annotate_transaction afe_why=address
acl afe_why_private annotate_transaction afe_why=private
acl afe_why_nothing annotate_transaction afe_why=nothing
acl afe_private dst 0.0.0.0/8 10.0.0.0/8 100.64.0.0/10 127.0.0.0/8 169.254.0.0/16 172.16.0.0/12 192.0.0.0/24 192.168.0.0/16 198.18.0.0/15 224.0.0.0/3 ::/127 fc00::/7 fe80::/10 ff00::/8
CONF
)"

# acl_lines NAME TYPE ENTRY... writes the ACL one entry a line; the lines
# of one ACL add up. squid 5.7 reads a line of at most 8191 characters
# (fgets of BUFSIZ) and the rest of a longer one as a directive of its
# own, which it refuses ("unrecognized"): a whole allowlist on one line
# (64 names of 253 characters, 16 KiB) stopped squid.
# One entry a line is 282 characters at most, whatever the list's length
# (docker/egress-proxy TestEntrypointRendersAdmissionsLargestAllowlist).
# The entries are those validated: no space, newline or glob.
acl_lines() {
	name="$1" type="$2"
	shift 2
	for entry in "$@"; do
		echo "acl ${name} ${type} ${entry}"
	done
}

render() {
	printf '%s\n' "# Written by afe-egress-proxy from AFE_EGRESS_HOSTS; do not edit." "# afe-allowlist ${allowlist_id}" "${fixed}"
	if [ -z "${allowed}" ]; then
		echo "http_access deny all afe_why_nothing"
		return
	fi
	# shellcheck disable=SC2086
	acl_lines afe_allowed "dstdomain -n" ${allowed}
	# shellcheck disable=SC2086
	acl_lines afe_host dst ${denied}
	echo "http_access deny afe_connect !afe_tls afe_why_port"
	echo "http_access deny !afe_connect !afe_http afe_why_port"
	echo "http_access deny !afe_allowed afe_why_host"
	[ -z "${denied}" ] || echo "http_access deny afe_host afe_why_address"
	[ "${private}" = 1 ] || echo "http_access deny afe_private afe_why_private"
	echo "http_access allow afe_allowed"
	echo "http_access deny all"
}

say() {
	echo "afe-egress-proxy: ${1} ${allowed:- nothing}; private destinations $([ "${private}" = 1 ] && echo allowed || echo refused)" >&2
}

# reload gives the running squid the validated allowlist: it rewrites the
# configuration and has squid read it again. Run in a subshell: a refusal
# exits it, and leaves squid's configuration as it was.
reload() {
	validate
	read -r pid <"${pidfile}" || fail "squid is not running"
	# Validated: the render cannot fail half-way. squid reads the file
	# only when told to.
	render >"${conf}" || fail "squid's configuration could not be written"
	kill -HUP "${pid}" || fail "squid (pid ${pid}) could not be told to reconfigure"
	say "now allowing"
}

# listen answers the controller's requests read on its stdin (see above).
# Each runs in a subshell (a fork, no new program), where a refusal ends
# the subshell alone; set -e does not hold in an if's condition, so every
# step of reload says itself how it fails.
listen() {
	set -f # the fields are split on spaces, never expanded as globs
	known_ips="${deny_ips}" # validated at the start
	while IFS= read -r line; do
		# shellcheck disable=SC2086
		set -- ${line}
		[ "$#" = 6 ] && [ "$1" = afe-allowlist ] || continue
		nonce="$2"
		case "${nonce}" in
		'' | *[!0-9a-f]*) continue ;;
		esac
		if (
			allowlist_id="$3" private="$4" hosts="$5" deny_ips="$6"
			[ "${hosts}" != - ] || hosts=""
			[ "${deny_ips}" != - ] || deny_ips=""
			reload
		) </dev/null; then
			known_ips="$6"
			[ "${known_ips}" != - ] || known_ips=""
			echo "afe-egress-proxy: allowlist $3 taken ${nonce}" >&2
		else
			echo "afe-egress-proxy: allowlist refused ${nonce}" >&2
		fi
	done
}

hosts="${AFE_EGRESS_HOSTS:-}"
private="${AFE_EGRESS_ALLOW_PRIVATE:-0}"
deny_ips="${AFE_EGRESS_DENY_IPS:-}"
allowlist_id="${AFE_EGRESS_ALLOWLIST_ID:-none}"
case "${1:-}" in
--render)
	validate
	render
	exit 0
	;;
--reload)
	reload
	echo "${allowlist_id}"
	exit 0
	;;
esac
validate
[ "$(id -u)" != 0 ] || fail "refusing to run squid as root; run the container as the proxy user"
render >"${conf}"
say allowing
# The listener reads the container's stdin (fd 3: a background job's own
# stdin would be /dev/null); squid gets neither.
exec 3<&0
listen <&3 &
exec squid -N -f "${conf}" </dev/null 3<&-
