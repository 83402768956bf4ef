#!/usr/bin/env bash
# Builds the local control plane (etcd, kube-apiserver and kube-scheduler) from
# the Go module proxy, because no envtest binary download is reachable here.
# The binaries are cached in bin/envtest/<k8s-version>/ (and in a per-user
# cache outside the checkout, so a fresh clone on the same machine does not
# rebuild them). Each binary is found, copied or built on its own: a checkout
# that already has some of them builds only the missing ones.
#
# kube-apiserver and kube-scheduler live in k8s.io/kubernetes, whose go.mod
# points its staging modules at ./staging/src/...; a throwaway module requires
# k8s.io/kubernetes and replaces each staging module with its published
# k8s.io/X v0.<minor>. Both commands are built from that one module, so the
# packages they share are compiled once.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
# The versions are the Makefile's (make envtest passes them); run on its own,
# the script reads them there, so that they are written in one place.
makefile_var() { sed -n "s/^$1 *?= *//p" "${ROOT}/Makefile"; }
KUBE_VERSION="${KUBE_VERSION:-$(makefile_var KUBE_VERSION)}"
ETCD_VERSION="${ETCD_VERSION:-$(makefile_var ETCD_VERSION)}"
OUT="${ROOT}/bin/envtest/${KUBE_VERSION#v}"
CACHE="${AFE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/afe}/envtest/${KUBE_VERSION#v}-etcd-${ETCD_VERSION#v}"

work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT
export GOFLAGS="-mod=mod"
export CGO_ENABLED=0

# place copies a file into a folder under a temporary name first, so a
# concurrent run never sees a half-written binary as present.
place() {
	local src="$1" dir="$2" name
	name="$(basename "${src}")"
	mkdir -p "${dir}"
	cp "${src}" "${dir}/.${name}.tmp.$$"
	mv -f "${dir}/.${name}.tmp.$$" "${dir}/${name}"
}

# kube_module prepares (once per run) the throwaway module in ${work}/kube
# that builds the commands of k8s.io/kubernetes.
kube_module() {
	local dir="${work}/kube"
	[[ -f "${dir}/go.mod" ]] && return
	mkdir -p "${dir}"
	(
		cd "${dir}"
		go mod init afe.dev/envtest-kube >/dev/null 2>&1
		local gomod
		gomod="$(go mod download -json "k8s.io/kubernetes@${KUBE_VERSION}" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
		local staging="v0.${KUBE_VERSION#v1.}"
		go mod edit -require="k8s.io/kubernetes@${KUBE_VERSION}"
		# Every "k8s.io/X => ./staging/src/k8s.io/X" becomes "k8s.io/X => k8s.io/X v0.N.P".
		grep -oE '^\s*k8s.io/[a-z0-9-]+ => ./staging/src/k8s.io/[a-z0-9-]+' "${gomod}" | awk '{print $1}' | while read -r m; do
			go mod edit -replace="${m}=${m}@${staging}"
		done
		printf 'package tools\n\nimport (\n\t_ "k8s.io/kubernetes/cmd/kube-apiserver"\n\t_ "k8s.io/kubernetes/cmd/kube-scheduler"\n)\n' >tools.go
		go mod tidy >/dev/null 2>&1 || true
	)
}

# build_kube builds the k8s.io/kubernetes command named $1 into $2.
build_kube() {
	kube_module
	(cd "${work}/kube" && go build -trimpath -ldflags="-s -w" -o "$2" "k8s.io/kubernetes/cmd/$1")
}

# build_etcd builds etcd into $2 ($1 is its name, for symmetry with build_kube).
build_etcd() {
	local dir="${work}/etcd"
	mkdir -p "${dir}"
	(
		cd "${dir}"
		go mod init afe.dev/envtest-etcd >/dev/null 2>&1
		go mod edit -require="go.etcd.io/etcd/server/v3@${ETCD_VERSION}"
		printf 'package tools\n\nimport _ "go.etcd.io/etcd/server/v3"\n' >tools.go
		go mod tidy >/dev/null 2>&1 || true
		go build -trimpath -ldflags="-s -w" -o "$2" go.etcd.io/etcd/server/v3
	)
}

# ensure makes OUT/$1 present: already there, copied from the cache, or built
# with the builder $3 (version $2) and then cached. One already there and not
# cached yet is cached too, for the next clone.
ensure() {
	local name="$1" version="$2" builder="$3"
	if [[ -x "${OUT}/${name}" ]]; then
		[[ -x "${CACHE}/${name}" ]] || place "${OUT}/${name}" "${CACHE}"
		return
	fi
	if [[ ! -x "${CACHE}/${name}" ]]; then
		echo "Building ${name} ${version} from the Go module proxy (several minutes, once)" >&2
		"${builder}" "${name}" "${work}/bin/${name}"
		place "${work}/bin/${name}" "${CACHE}"
	fi
	place "${CACHE}/${name}" "${OUT}"
}

ensure etcd "${ETCD_VERSION}" build_etcd
ensure kube-apiserver "${KUBE_VERSION}" build_kube
ensure kube-scheduler "${KUBE_VERSION}" build_kube
echo "${OUT}"
