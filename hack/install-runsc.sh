#!/usr/bin/env bash
# Installs gVisor's runsc, built from source at a pinned version, and
# registers it with the local Docker engine as the runtime RUNSC_NAME
# (default runsc):
#   1. builds gvisor.dev/gvisor/runsc@RUNSC_VERSION (the Makefile pins it)
#      through the Go module proxy, once: the binary is cached in the
#      checkout as bin/runsc-RUNSC_VERSION (about 2 minutes the first time,
#      nothing after);
#   2. installs it as /usr/local/lib/afe/runsc-RUNSC_VERSION (root's, 0755):
#      the engine runs its runtimes as root, so the binary it runs must not
#      be writable by the checkout's owner, and a checkout in a home folder
#      may not even be reachable by root (root squash, 0700 homes). The
#      version in the name lets a new pin install beside the old one: a
#      binary that runs sandboxes is never overwritten;
#   3. puts the runtime under "runtimes" in the engine's daemon.json
#      (DOCKER_DAEMON_JSON, default /etc/docker/daemon.json), keeping every
#      other setting and replacing the runtime's own entry;
#   4. reloads the engine with SIGHUP (runtimes reload without a restart:
#      no container stops) and waits until `docker info` lists it as asked.
# Idempotent: a cached build and an installed binary are used as they are,
# and a runtime registered as asked is left alone, without a reload.
# It needs root, a local engine (unix socket), Go and a writable
# daemon.json, and refuses clearly otherwise; on another engine, do the same
# by hand (docs/concepts.md, 'Hostile code: a user-space kernel (gVisor)').
#
# Debian's runsc package (0.0~20221219) is not used: it is years behind
# gVisor, lacks the systrap platform and refuses its own network stack on
# 6.x kernels.
#
# The runtime's arguments (docs/security.md says why):
#   --platform=RUNSC_PLATFORM  systrap (default): seccomp traps, needing
#                              neither /dev/kvm nor ptrace; kvm where
#                              /dev/kvm is usable;
#   --overlay2=none            the container's root filesystem written in
#                              the engine's own writable layer, as under
#                              runc, where the controller measures its disk
#                              and inodes and `docker cp` reads it (gVisor's
#                              default overlay keeps those writes in a file
#                              or in memory of its own).
# The network is gVisor's own stack (netstack, runsc's default): the host
# kernel's network code stays out of the workload's reach.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
# The version is the Makefile's (make runsc passes it); run on its own, the
# script reads it there, so that it is written in one place.
makefile_var() { sed -n "s/^$1 *?= *//p" "${ROOT}/Makefile"; }
VERSION="${RUNSC_VERSION:-$(makefile_var RUNSC_VERSION)}"
NAME="${RUNSC_NAME:-runsc}"
DAEMON_JSON="${DOCKER_DAEMON_JSON:-/etc/docker/daemon.json}"
PLATFORM="${RUNSC_PLATFORM:-systrap}"
CACHED="${ROOT}/bin/runsc-${VERSION}"
LIBDIR=/usr/local/lib/afe
RUNSC="${LIBDIR}/runsc-${VERSION}"
ARGS=("--platform=${PLATFORM}" "--overlay2=none")

die() { echo "install-runsc: $*" >&2; exit 1; }

[[ -n "${VERSION}" ]] || die "no RUNSC_VERSION (the Makefile pins it: run make runsc)"
case "${DOCKER_HOST:-unix:///var/run/docker.sock}" in
unix://*) ;;
*) die "the engine is remote (DOCKER_HOST=${DOCKER_HOST}): install runsc on its host and register it there (docs/concepts.md, 'Hostile code: a user-space kernel (gVisor)')" ;;
esac
[[ "$(id -u)" == 0 ]] || die "run as root (it installs ${RUNSC}, writes ${DAEMON_JSON} and signals dockerd)"
command -v docker >/dev/null || die "docker is not installed"
docker info >/dev/null 2>&1 || die "the Docker engine does not answer"
command -v go >/dev/null || die "go is not installed: runsc is built from source (gvisor.dev/gvisor/runsc@${VERSION})"

dir="$(dirname "${DAEMON_JSON}")"
[[ -d "${dir}" ]] || mkdir -p "${dir}"
if [[ -e "${DAEMON_JSON}" && ! -w "${DAEMON_JSON}" ]] || [[ ! -w "${dir}" ]]; then
	die "${DAEMON_JSON} is not writable"
fi

# runs tells whether a binary is runsc of this version: the build stamps
# the version in (a module build would print VERSION_MISSING), so a stale or
# broken file under the name is rebuilt, not trusted.
runs() { [[ "$("$1" --version 2>/dev/null | head -1)" == "runsc version ${VERSION}" ]]; }

if ! runs "${CACHED}"; then
	echo "install-runsc: building gvisor.dev/gvisor/runsc@${VERSION} (about 2 minutes the first time)"
	work="$(mktemp -d)"
	trap 'rm -rf "${work}"' EXIT
	# Outside the checkout and without the caller's GOFLAGS (-mod=vendor,
	# say): `go install pkg@version` builds gVisor's module with its own
	# go.mod, never ours. CGO_ENABLED=0: a static binary, which the engine
	# runs whatever the host's libc.
	(cd "${work}" && CGO_ENABLED=0 GOFLAGS='' GOBIN="${work}" go install \
		-ldflags "-X gvisor.dev/gvisor/runsc/version.version=${VERSION}" \
		"gvisor.dev/gvisor/runsc@${VERSION}") || die "the build of gvisor.dev/gvisor/runsc@${VERSION} failed"
	mkdir -p "$(dirname "${CACHED}")"
	# Under a temporary name first: a concurrent run never sees a
	# half-written binary as present.
	cp "${work}/runsc" "${CACHED}.tmp.$$"
	mv -f "${CACHED}.tmp.$$" "${CACHED}"
	runs "${CACHED}" || die "the runsc just built (${CACHED}) does not run"
fi

# An installed binary of this version is left alone: the engine may be
# running sandboxes on it.
if ! runs "${RUNSC}"; then
	install -d -m 0755 -o root -g root "${LIBDIR}"
	install -m 0755 -o root -g root "${CACHED}" "${RUNSC}.tmp.$$"
	mv -f "${RUNSC}.tmp.$$" "${RUNSC}"
	echo "install-runsc: installed ${RUNSC}"
fi

result="$(cd "${ROOT}" && go run ./hack/daemonjson -file "${DAEMON_JSON}" -name "${NAME}" -path "${RUNSC}" \
	-arg "${ARGS[0]}" -arg "${ARGS[1]}")"
# listed tells whether the engine runs the runtime as asked: before the
# reload, it may still list an older entry under the same name.
listed() {
	[[ "$(docker info --format "{{with index .Runtimes \"${NAME}\"}}{{.Path}}{{range .Args}} {{.}}{{end}}{{end}}" 2>/dev/null)" == "${RUNSC} ${ARGS[*]}" ]]
}
if [[ "${result}" == unchanged ]] && listed; then
	echo "install-runsc: runtime ${NAME} (${RUNSC} ${ARGS[*]}) is registered already"
	exit 0
fi

# The engine runs every later command on a container (exec, stop, delete)
# with the binary its runtime's name has now, not the one that started it:
# a runsc of another version may not read the state the first one left
# (seen: Debian's runsc on a container of this build, every exec failing
# with "cannot execute in container ... in state stopped").
running="$(docker ps -q | xargs -r docker inspect --format '{{.HostConfig.Runtime}}' 2>/dev/null | grep -cx -- "${NAME}" || true)"
if [[ "${running:-0}" != 0 ]]; then
	echo "install-runsc: warning: ${running} running container(s) use runtime ${NAME}: after the reload the engine runs their exec and stop with ${RUNSC}; recreate them" >&2
fi

pid="$(pidof dockerd || true)"
[[ -n "${pid}" ]] || die "no dockerd process to reload here: is the engine local?"
# pidof lists every dockerd of the host: each reloads its daemon.json.
read -ra pids <<<"${pid}"
kill -HUP "${pids[@]}"
for _ in $(seq 50); do
	listed && { echo "install-runsc: runtime ${NAME} registered (${RUNSC} ${ARGS[*]}), engine reloaded"; exit 0; }
	sleep 0.2
done
die "the engine did not list runtime ${NAME} as ${RUNSC} ${ARGS[*]} after the reload: see its log"
