#!/usr/bin/env bash
# Builds a Debian base image with squid installed, offline, from Debian's
# packages: debootstrap of a minimal bookworm (the mirror is read from apt's
# own configuration), then squid installed in a chroot with the machine's
# apt sources (security updates included), then `docker import`.
# Usage: build-squid-base.sh IMAGE
set -euo pipefail
IMAGE="$1"
SUITE="${SUITE:-bookworm}"

if ! command -v debootstrap >/dev/null; then
	apt-get update >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y debootstrap >/dev/null
fi

# mirror: the first Debian archive apt is configured with (deb822 or one-line).
mirror() {
	local m
	m="$(awk '/^URIs:/ && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)"
	if [[ -z "${m}" ]]; then
		m="$(awk '$1 == "deb" && $3 !~ /security/ {print $2; exit}' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null || true)"
	fi
	[[ -n "${m}" ]] || { echo "no Debian mirror in apt's configuration" >&2; exit 1; }
	echo "${m}"
}

work="$(mktemp -d)"
cleanup() {
	umount "${work}/rootfs/proc" 2>/dev/null || true
	rm -rf "${work}"
}
trap cleanup EXIT
rootfs="${work}/rootfs"
debootstrap --variant=minbase "${SUITE}" "${rootfs}" "$(mirror)" >"${work}/debootstrap.log" 2>&1 || {
	tail -20 "${work}/debootstrap.log" >&2
	exit 1
}
# Install squid with the machine's apt sources, so security updates apply.
rm -f "${rootfs}/etc/apt/sources.list"
mkdir -p "${rootfs}/etc/apt/sources.list.d"
cp /etc/apt/sources.list.d/*.sources "${rootfs}/etc/apt/sources.list.d/" 2>/dev/null || true
[[ -f /etc/apt/sources.list ]] && cp /etc/apt/sources.list "${rootfs}/etc/apt/sources.list"
cp /etc/resolv.conf "${rootfs}/etc/resolv.conf"
mount -t proc proc "${rootfs}/proc"
chroot "${rootfs}" /bin/sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends squid ca-certificates >/dev/null && apt-get clean && rm -rf /var/lib/apt/lists/*'
umount "${rootfs}/proc"
: >"${rootfs}/etc/resolv.conf"
tar -C "${rootfs}" --numeric-owner -c . | docker import --change 'CMD ["/bin/bash"]' - "${IMAGE}" >/dev/null
echo "built ${IMAGE}"
