#!/usr/bin/env bash
# Installs gVisor's runsc (Debian's package) and registers it with the local
# Docker engine as the runtime RUNSC_NAME (default runsc), offline:
#   1. installs the package runsc with apt when /usr/bin/runsc is missing;
#   2. adds the runtime under "runtimes" in the engine's daemon.json
#      (DOCKER_DAEMON_JSON, default /etc/docker/daemon.json), keeping every
#      other setting;
#   3. reloads the engine with SIGHUP (runtimes reload without a restart:
#      no container stops) and waits until `docker info` lists it.
# Idempotent: a runtime registered as asked is left alone, without a reload.
# It needs root, a local engine (unix socket) and a writable daemon.json, and
# refuses clearly otherwise; on another engine, do the same by hand (docs/concepts.md, 'Hostile code: a user-space kernel (gVisor)').
#
# The runtime's arguments (docs/security.md says why):
#   --platform=RUNSC_PLATFORM  ptrace (default; needs no virtualisation), or
#                              kvm where /dev/kvm is usable;
#   --network=RUNSC_NETWORK    default: "sandbox" (gVisor's own network stack,
#                              the host kernel's network code out of reach)
#                              where this runsc can run it, else "host": the
#                              container's own network namespace, its socket
#                              calls served by the host kernel. Debian's
#                              runsc (20221219) refuses its own stack on
#                              kernels that show net.core.rmem_default in
#                              every network namespace (6.x), taking it for
#                              the host's.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
NAME="${RUNSC_NAME:-runsc}"
DAEMON_JSON="${DOCKER_DAEMON_JSON:-/etc/docker/daemon.json}"
PLATFORM="${RUNSC_PLATFORM:-ptrace}"
RUNSC=/usr/bin/runsc

die() { echo "install-runsc: $*" >&2; exit 1; }

case "${DOCKER_HOST:-unix:///var/run/docker.sock}" in
unix://*) ;;
*) die "the engine is remote (DOCKER_HOST=${DOCKER_HOST}): install runsc on its host and register it there (docs/concepts.md, 'Hostile code: a user-space kernel (gVisor)')" ;;
esac
[[ "$(id -u)" == 0 ]] || die "run as root (it installs a package, writes ${DAEMON_JSON} and signals dockerd)"
command -v docker >/dev/null || die "docker is not installed"
docker info >/dev/null 2>&1 || die "the Docker engine does not answer"

if [[ ! -x "${RUNSC}" ]]; then
	echo "install-runsc: installing Debian's runsc"
	apt-get install -y runsc >/dev/null 2>&1 || {
		apt-get update >/dev/null
		apt-get install -y runsc >/dev/null
	}
fi
"${RUNSC}" --version >/dev/null || die "${RUNSC} does not run"

if [[ -z "${RUNSC_NETWORK:-}" ]]; then
	# The test runsc makes before it runs its own network stack: a network
	# namespace that shows net.core.rmem_default is taken for the host's.
	if unshare --net test -e /proc/sys/net/core/rmem_default 2>/dev/null; then
		RUNSC_NETWORK=host
	else
		RUNSC_NETWORK=sandbox
	fi
fi

dir="$(dirname "${DAEMON_JSON}")"
[[ -d "${dir}" ]] || mkdir -p "${dir}"
if [[ -e "${DAEMON_JSON}" && ! -w "${DAEMON_JSON}" ]] || [[ ! -w "${dir}" ]]; then
	die "${DAEMON_JSON} is not writable"
fi

result="$(cd "${ROOT}" && go run ./hack/daemonjson -file "${DAEMON_JSON}" -name "${NAME}" -path "${RUNSC}" \
	-arg "--platform=${PLATFORM}" -arg "--network=${RUNSC_NETWORK}")"
listed() { docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q "\"${NAME}\""; }
if [[ "${result}" == unchanged ]] && listed; then
	echo "install-runsc: runtime ${NAME} (--platform=${PLATFORM} --network=${RUNSC_NETWORK}) is registered already"
	exit 0
fi

pid="$(pidof dockerd || true)"
[[ -n "${pid}" ]] || die "no dockerd process to reload here: is the engine local?"
kill -HUP ${pid}
for _ in $(seq 50); do
	listed && { echo "install-runsc: runtime ${NAME} registered (--platform=${PLATFORM} --network=${RUNSC_NETWORK}), engine reloaded"; exit 0; }
	sleep 0.2
done
die "the engine did not list runtime ${NAME} after the reload: see its log"
