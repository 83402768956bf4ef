#!/usr/bin/env bash
# Builds the project's images offline, from Debian's packages, without any
# container registry:
#   afe/busybox:dev   a small test sandbox image (busybox-static in a
#                     `docker import`ed rootfs).
# Each image carries the hash of the inputs it was built from and is rebuilt
# only when they change (FORCE=1 rebuilds anyway).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUSYBOX_IMG="${BUSYBOX_IMG:-afe/busybox:dev}"

inputs_hash() { cat "$@" | sha256sum | cut -c1-16; }

# current IMAGE HASH: true when IMAGE exists and was built from HASH.
current() {
	[[ "${FORCE:-0}" != 1 ]] &&
		[[ "$(docker image inspect -f '{{ index .Config.Labels "afe.build" }}' "$1" 2>/dev/null)" == "$2" ]]
}

# fetch_deb PACKAGE DIR: downloads PACKAGE's .deb into DIR with apt.
fetch_deb() {
	(cd "$2" && apt-get download "$1" >/dev/null 2>&1) || {
		apt-get update >/dev/null
		(cd "$2" && apt-get download "$1" >/dev/null)
	}
}

build_busybox() {
	local hash
	hash="$(inputs_hash "${BASH_SOURCE[0]}")"
	if current "${BUSYBOX_IMG}" "${hash}"; then
		return
	fi
	local work
	work="$(mktemp -d)"
	trap 'rm -rf "${work}"' RETURN
	fetch_deb busybox-static "${work}"
	dpkg-deb -x "${work}"/busybox-static_*.deb "${work}/pkg"
	local rootfs="${work}/rootfs"
	mkdir -p "${rootfs}"/{bin,etc,tmp,home/sandbox}
	cp "${work}/pkg/bin/busybox" "${rootfs}/bin/busybox"
	for applet in $("${rootfs}/bin/busybox" --list); do
		[[ -e "${rootfs}/bin/${applet}" ]] || ln -s busybox "${rootfs}/bin/${applet}"
	done
	chmod 1777 "${rootfs}/tmp"
	printf 'root:x:0:0:root:/root:/bin/sh\nsandbox:x:1000:1000:sandbox:/home/sandbox:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"${rootfs}/etc/passwd"
	printf 'root:x:0:\nsandbox:x:1000:\nnogroup:x:65534:\n' >"${rootfs}/etc/group"
	chown 1000:1000 "${rootfs}/home/sandbox"
	tar -C "${rootfs}" --numeric-owner -c . | docker import \
		--change 'ENV PATH=/bin' \
		--change 'CMD ["/bin/sh"]' \
		--change "LABEL afe.build=${hash}" \
		- "${BUSYBOX_IMG}" >/dev/null
	echo "built ${BUSYBOX_IMG}"
}

build_busybox
