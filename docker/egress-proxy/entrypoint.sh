#!/bin/sh
# afe egress proxy: runs squid in the foreground, as the user it was started
# as (never root), with the configuration the controller rendered
# (internal/egress), and takes a new one in place. It decides nothing of
# what squid admits: every rule is the controller's Go code. It only checks
# that a configuration is whole before squid reads it: printable ASCII
# lines, none empty, framed by "# afe-allowlist ID" and
# "# afe-allowlist-end ID" of one ID (lower-case hex).
#
#   AFE_EGRESS_CONFIG  squid's configuration, rendered by the controller
#   AFE_EGRESS_HOSTS   the allowlist the proxy was created with, for whoever
#                      reads `docker inspect`; not read here
#
# With --check it only checks AFE_EGRESS_CONFIG (exit 0, or 64 saying why).
# With --admits it prints the ID of the configuration squid runs with.
#
# The controller changes the configuration of a running proxy through the
# container's stdin, which the engine holds open and only a client of the
# engine's API can write (the workload reaches squid's port only), one
# request a line:
#
#   afe-egress-config NONCE LENGTH TEXT
#
# NONCE is the controller's, lower-case hex; TEXT the configuration with
# each newline written as a tab, LENGTH bytes long. A request whose text is
# whole is written to a file of its own, renamed over squid's (squid, still
# reading the file of a change before, reads a whole one: never a file being
# written) and squid is told to read it again: connections in flight go on,
# new requests meet the new rules. The answer is a line on stderr ending with
# the nonce, "afe-egress-proxy: allowlist ID taken NONCE" or
# "afe-egress-proxy: allowlist refused NONCE"; any other line is ignored.
# With --listen it answers requests without starting squid (the tests').
set -eu

tab="$(printf '\t')"
nl='
'
conf="${TMPDIR:-/tmp}/squid.conf"
pidfile="${TMPDIR:-/tmp}/squid.pid"

fail() {
	echo "afe-egress-proxy: $*" >&2
	exit 64
}

# whole TEXT SEP is true when TEXT, its lines separated by SEP (the last
# without one), is a whole configuration, and sets id to its ID; else why
# says what is wrong. Builtins only.
whole() {
	text="$1" sep="$2"
	why="is longer than 64 KiB"
	[ "${#text}" -le 65536 ] || return 1
	why="holds a character other than printable ASCII"
	case "${text}" in
	*[!\ -~"${sep}"]*) return 1 ;;
	esac
	why="holds an empty line"
	case "${sep}${text}${sep}" in
	*"${sep}${sep}"*) return 1 ;;
	esac
	why="does not start with its header"
	first="${text%%"${sep}"*}"
	id="${first#"# afe-allowlist "}"
	[ "${id}" != "${first}" ] || return 1
	case "${id}" in
	'' | *[!0-9a-f]*) return 1 ;;
	esac
	[ "${#id}" -le 64 ] || return 1
	why="is cut: it does not end with the trailer of its ID"
	[ "${text##*"${sep}"}" = "# afe-allowlist-end ${id}" ]
}

# take gives the running squid the configuration of a request (nonce,
# length and text set): written whole to a file of its own, renamed over
# squid's, then squid told to read it. Run in a subshell: a refusal exits
# it, and leaves squid's configuration as it was. set -e does not hold in
# an if's condition, so every step says itself how it fails.
take() {
	[ "${#text}" = "${length}" ] || fail "the configuration is not of its length"
	text="${text%"${tab}"}"
	whole "${text}" "${tab}" || fail "the configuration ${why}"
	read -r pid <"${pidfile}" || fail "squid is not running"
	IFS="${tab}"
	# shellcheck disable=SC2086 # split on tabs, never globbed (set -f)
	set -- ${text}
	unset IFS
	printf '%s\n' "$@" >"${conf}.new" || fail "the configuration could not be written"
	mv -f "${conf}.new" "${conf}" || fail "the configuration could not be renamed into place"
	kill -HUP "${pid}" || fail "squid (pid ${pid}) could not be told to reconfigure"
	echo "afe-egress-proxy: allowlist ${id} taken ${nonce}" >&2
}

# listen answers the controller's requests read on its stdin (see above).
listen() {
	set -f
	while IFS= read -r line; do
		rest="${line#afe-egress-config }"
		[ "${rest}" != "${line}" ] || continue
		case "${rest}" in
		*" "*" "*) ;;
		*) continue ;;
		esac
		nonce="${rest%% *}"
		rest="${rest#* }"
		length="${rest%% *}"
		text="${rest#* }"
		case "${nonce}" in
		'' | *[!0-9a-f]*) continue ;;
		esac
		[ "${#nonce}" -le 64 ] || continue
		case "${length}" in
		'' | *[!0-9]*) continue ;;
		esac
		(take) </dev/null || echo "afe-egress-proxy: allowlist refused ${nonce}" >&2
	done
}

case "${1:-}" in
--admits)
	read -r first <"${conf}" || fail "squid has no configuration of the controller's"
	echo "${first#"# afe-allowlist "}"
	exit 0
	;;
--listen)
	listen
	exit 0
	;;
esac
config="${AFE_EGRESS_CONFIG:-}"
[ -n "${config}" ] || fail "AFE_EGRESS_CONFIG is empty: squid's configuration is the controller's to render (internal/egress)"
config="${config%"${nl}"}"
whole "${config}" "${nl}" || fail "AFE_EGRESS_CONFIG ${why}"
[ "${1:-}" != --check ] || exit 0
[ "$(id -u)" != 0 ] || fail "refusing to run squid as root; run the container as the proxy user"
printf '%s\n' "${config}" >"${conf}"
echo "afe-egress-proxy: starting squid with configuration ${id}" >&2
# The listener reads the container's stdin (fd 3: a background job's own
# stdin would be /dev/null); squid gets neither.
exec 3<&0
listen <&3 &
exec squid -N -f "${conf}" </dev/null 3<&-
