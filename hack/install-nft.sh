#!/usr/bin/env bash
# Installs Debian's nftables package when `nft` is missing, offline as the
# rest of hack/: the package comes from the machine's configured Debian
# mirror through apt, like hack/install-prometheus.sh's prometheus. The
# manager run as root on the engine host (`make run`, the test suites)
# bounds each sandbox's share of the host's conntrack table with an nftables
# table of its instance (--sandbox-conn-rate; internal/connlimit), written
# with the host's `nft`. The package's service is left as Debian ships it
# (disabled): the manager writes only its own table.
# Idempotent: with nft on PATH it installs nothing.
set -euo pipefail

die() { echo "install-nft: $*" >&2; exit 1; }

if command -v nft >/dev/null || [[ -x /usr/sbin/nft ]]; then
	exit 0
fi
[[ "$(id -u)" == 0 ]] || die "nft is missing: install Debian's package nftables (apt-get install --no-install-recommends nftables), or run this as root"
command -v apt-get >/dev/null || die "nft is missing and there is no apt-get: install nftables by hand, or run the manager with --sandbox-conn-rate=0"

echo "install-nft: installing Debian's nftables (nft)"
export DEBIAN_FRONTEND=noninteractive
apt-get install -y --no-install-recommends nftables >/dev/null 2>&1 || {
	apt-get update >/dev/null
	apt-get install -y --no-install-recommends nftables >/dev/null
}
{ command -v nft >/dev/null || [[ -x /usr/sbin/nft ]]; } || die "the package nftables installed no nft"
echo "install-nft: $(/usr/sbin/nft --version 2>&1 | head -1)"
