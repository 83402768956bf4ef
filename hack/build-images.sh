#!/usr/bin/env bash
# Builds the project's images offline, from Debian's packages, without any
# container registry:
#   afe/busybox:dev        a small test sandbox image (busybox-static in a
#                          `docker import`ed rootfs, plus the static test
#                          tools of test/tools).
#   afe/git:dev            the same busybox base with Debian's git (and the
#                          libraries it links), for the builtin Run tests.
#   afe/sh:dev             an image with nothing but a shell: Debian's dash
#                          as /bin/sh and the C library it links; no other
#                          program (no sleep, kill or ps), for the tests of
#                          the keep-alive and of Run timeouts.
#   afe/nft:dev            the same busybox base with Debian's nft (and the
#                          libraries it links): the helper container through
#                          which a manager outside the engine host's network
#                          namespace installs the conntrack bound
#                          (--sandbox-conn-image).
#   afe/squid-base:bookworm  Debian with squid, from debootstrap (once).
#   afe/egress-proxy:dev   the egress proxy, docker/egress-proxy on that base;
#                          where a registry is reachable, build it with
#                          PROXY_BASE=debian:bookworm-slim instead.
# Each image carries the hash of the inputs it was built from and is rebuilt
# only when they change (FORCE=1 rebuilds anyway).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUSYBOX_IMG="${BUSYBOX_IMG:-afe/busybox:dev}"
GIT_IMG="${GIT_IMG:-afe/git:dev}"
SH_IMG="${SH_IMG:-afe/sh:dev}"
NFT_IMG="${NFT_IMG:-afe/nft:dev}"
PROXY_IMG="${PROXY_IMG:-afe/egress-proxy:dev}"
PROXY_BASE="${PROXY_BASE:-afe/squid-base:bookworm}"

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

# extract_debs WORK ROOTFS PACKAGE...: the packages' files, unpacked into
# ROOTFS (no maintainer scripts run).
extract_debs() {
	local work="$1" rootfs="$2" deb
	shift 2
	mkdir -p "${work}/debs"
	for deb in "$@"; do
		fetch_deb "${deb}" "${work}/debs"
	done
	for deb in "${work}"/debs/*.deb; do
		dpkg-deb -x "${deb}" "${rootfs}"
	done
}

# busybox_rootfs WORK: a busybox-static root filesystem in WORK/rootfs, with
# a sandbox user 1000 and a world-writable /tmp.
busybox_rootfs() {
	local work="$1"
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
}

# busybox_debs_rootfs WORK PACKAGE...: busybox_rootfs with the packages'
# files unpacked into it.
busybox_debs_rootfs() {
	local work="$1"
	shift
	busybox_rootfs "${work}"
	extract_debs "${work}" "${work}/rootfs" "$@"
}

# import_rootfs ROOTFS IMAGE HASH PATH: docker import of the tree.
import_rootfs() {
	tar -C "$1" --numeric-owner -c . | docker import \
		--change "ENV PATH=$4" \
		--change 'CMD ["/bin/sh"]' \
		--change "LABEL afe.build=$3" \
		- "$2" >/dev/null
	echo "built $2"
}

build_busybox() {
	local hash
	hash="$(inputs_hash "${BASH_SOURCE[0]}" "${ROOT}"/test/tools/*/*.go)"
	if current "${BUSYBOX_IMG}" "${hash}"; then
		return
	fi
	local work
	work="$(mktemp -d)"
	trap 'rm -rf "${work}"' RETURN
	busybox_rootfs "${work}"
	local rootfs="${work}/rootfs"
	# Test tools, static Go binaries.
	(cd "${ROOT}" && CGO_ENABLED=0 go build -trimpath -o "${rootfs}/bin/afe-udpsink" ./test/tools/udpsink)
	# A setuid-root program: the escape tests check that it grants nothing
	# under no-new-privileges.
	mkdir -p "${rootfs}/opt/suid"
	(cd "${ROOT}" && CGO_ENABLED=0 go build -trimpath -o "${rootfs}/opt/suid/euid" ./test/tools/euid)
	chmod 4755 "${rootfs}/opt/suid/euid"
	# A process that hides its /proc directory's owner (root's, once
	# undumpable): the kill of a Run's processes still finds it.
	(cd "${ROOT}" && CGO_ENABLED=0 go build -trimpath -o "${rootfs}/bin/afe-undumpable" ./test/tools/undumpable)
	import_rootfs "${rootfs}" "${BUSYBOX_IMG}" "${hash}" /bin
}

# GIT_DEBS are git and the libraries /usr/bin/git links (ldd: libc, pcre2,
# zlib). git's other dependencies serve programs this image leaves out: the
# HTTP transports (curl), send-email and svn (perl), the manual.
GIT_DEBS=(git libc6 libpcre2-8-0 zlib1g)

build_git() {
	local hash
	hash="$(inputs_hash "${BASH_SOURCE[0]}")"
	if current "${GIT_IMG}" "${hash}"; then
		return
	fi
	local work
	work="$(mktemp -d)"
	trap 'rm -rf "${work}"' RETURN
	local rootfs="${work}/rootfs"
	busybox_debs_rootfs "${work}" "${GIT_DEBS[@]}"
	# Programs that need libraries left out, and documentation.
	(cd "${rootfs}/usr/lib/git-core" && rm -f git-remote-http git-remote-https git-remote-ftp git-remote-ftps \
		git-http-fetch git-http-push git-imap-send)
	rm -rf "${rootfs}"/usr/share/{doc,man,locale,lintian,bash-completion,gitweb,git-gui,gitk}
	import_rootfs "${rootfs}" "${GIT_IMG}" "${hash}" /bin:/usr/bin
	# Smoke test: a commit and a merge, as the sandbox user, without network.
	docker run --rm --network none --user 1000:1000 -e HOME=/tmp -w /tmp "${GIT_IMG}" sh -ec '
		git init -q -b main r && cd r
		git -c user.name=t -c user.email=t@t commit -q --allow-empty -m base
		git switch -q -c lane && echo x > f && git add f && git -c user.name=t -c user.email=t@t commit -q -m lane
		git switch -q main && git -c user.name=t -c user.email=t@t merge -q --no-ff --no-edit lane
		test -f f' || { docker rmi "${GIT_IMG}" >/dev/null; echo "${GIT_IMG}: git does not work" >&2; exit 1; }
}

build_sh() {
	local hash
	hash="$(inputs_hash "${BASH_SOURCE[0]}")"
	if current "${SH_IMG}" "${hash}"; then
		return
	fi
	local work
	work="$(mktemp -d)"
	trap 'rm -rf "${work}"' RETURN
	local rootfs="${work}/rootfs"
	mkdir -p "${rootfs}"/{etc,tmp}
	extract_debs "${work}" "${rootfs}" dash libc6
	rm -rf "${rootfs}"/usr/share
	# Every program but dash goes: only the shell and its libraries stay.
	find "${rootfs}" -type f -perm /111 ! -name '*.so*' ! -name dash -delete
	if [[ ! -e "${rootfs}/bin/sh" ]]; then
		mkdir -p "${rootfs}/bin"
		ln -s "$(cd "${rootfs}" && find . -type f -name dash | head -n1 | cut -c2-)" "${rootfs}/bin/sh"
	fi
	chmod 1777 "${rootfs}/tmp"
	printf 'root:x:0:0:root:/root:/bin/sh\nsandbox:x:1000:1000:sandbox:/tmp:/bin/sh\n' >"${rootfs}/etc/passwd"
	printf 'root:x:0:\nsandbox:x:1000:\n' >"${rootfs}/etc/group"
	import_rootfs "${rootfs}" "${SH_IMG}" "${hash}" /bin:/usr/bin
	# The shell works, and nothing else is there to run.
	docker run --rm --network none "${SH_IMG}" /bin/sh -c 'echo ok; sleep 0 2>/dev/null && exit 1; exit 0' >/dev/null ||
		{ docker rmi "${SH_IMG}" >/dev/null; echo "${SH_IMG}: not a shell-only image" >&2; exit 1; }
}

# NFT_DEBS are nft and the libraries /usr/sbin/nft links (ldd).
NFT_DEBS=(nftables libnftables1 libc6 libedit2 libmnl0 libnftnl11 libxtables12 libjansson4 libgmp10 libtinfo6 libbsd0 libmd0)

build_nft() {
	local hash
	hash="$(inputs_hash "${BASH_SOURCE[0]}")"
	if current "${NFT_IMG}" "${hash}"; then
		return
	fi
	local work
	work="$(mktemp -d)"
	trap 'rm -rf "${work}"' RETURN
	busybox_debs_rootfs "${work}" "${NFT_DEBS[@]}"
	rm -rf "${work}"/rootfs/usr/share/{doc,man,locale,lintian} "${work}"/rootfs/etc/nftables.conf
	import_rootfs "${work}/rootfs" "${NFT_IMG}" "${hash}" /bin:/usr/bin:/usr/sbin:/sbin
	# Smoke test: nft lists the tables of a network namespace of its own
	# with NET_ADMIN alone.
	docker run --rm --network none --cap-drop ALL --cap-add NET_ADMIN "${NFT_IMG}" nft list tables >/dev/null ||
		{ docker rmi "${NFT_IMG}" >/dev/null; echo "${NFT_IMG}: nft does not work" >&2; exit 1; }
}

build_proxy() {
	local hash
	hash="$(inputs_hash "${BASH_SOURCE[0]}" "${ROOT}"/docker/egress-proxy/{Dockerfile,entrypoint.sh,probe.sh})"
	if current "${PROXY_IMG}" "${hash}"; then
		return
	fi
	if [[ "${PROXY_BASE}" == afe/squid-base:* ]] && ! docker image inspect "${PROXY_BASE}" >/dev/null 2>&1; then
		"${ROOT}/hack/build-squid-base.sh" "${PROXY_BASE}"
	fi
	# The classic builder works with every engine from 20.10 on and needs no
	# buildx plugin.
	DOCKER_BUILDKIT=0 docker build -q \
		--build-arg BASE="${PROXY_BASE}" \
		--label afe.build="${hash}" \
		-t "${PROXY_IMG}" "${ROOT}/docker/egress-proxy" >/dev/null
	echo "built ${PROXY_IMG}"
}

build_busybox
build_git
build_sh
build_nft
build_proxy
