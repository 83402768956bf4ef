#!/usr/bin/env bash
# Installs Debian's prometheus package when promtool (or prometheus) is
# missing, offline as the rest of hack/: the package comes from the machine's
# configured Debian mirror through apt, like hack/install-runsc.sh's runsc.
# `make promtool` runs it before the rule tests (config/prometheus) and the
# dashboard's test (config/grafana), which start Debian's prometheus on
# loopback. The package's service is not started: the tests start their own
# server, on a free port, with a data directory of their own.
# Idempotent: with both binaries on PATH it installs nothing.
set -euo pipefail

die() { echo "install-prometheus: $*" >&2; exit 1; }

if command -v promtool >/dev/null && command -v prometheus >/dev/null; then
	exit 0
fi
[[ "$(id -u)" == 0 ]] || die "promtool is missing: install Debian's package prometheus (apt-get install --no-install-recommends prometheus), or run this as root"
command -v apt-get >/dev/null || die "promtool is missing and there is no apt-get: install Prometheus 2.x (promtool) by hand"

echo "install-prometheus: installing Debian's prometheus (promtool)"
# policy-rc.d refuses the package's service start: a test owns its server.
policy=/usr/sbin/policy-rc.d
made_policy=
if [[ ! -e "${policy}" ]]; then
	printf '#!/bin/sh\nexit 101\n' >"${policy}"
	chmod +x "${policy}"
	made_policy=1
fi
cleanup() { [[ -z "${made_policy}" ]] || rm -f "${policy}"; }
trap cleanup EXIT
export DEBIAN_FRONTEND=noninteractive
apt-get install -y --no-install-recommends prometheus >/dev/null 2>&1 || {
	apt-get update >/dev/null
	apt-get install -y --no-install-recommends prometheus >/dev/null
}
command -v promtool >/dev/null || die "the package prometheus installed no promtool"
echo "install-prometheus: $(promtool --version 2>&1 | head -1)"
