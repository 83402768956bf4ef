#!/usr/bin/env bash
# Builds the envtest control plane (kube-apiserver and etcd) from the Go module
# proxy, because no envtest binary download is reachable here. The binaries are
# cached in bin/envtest/<k8s-version>/ (and in a per-user cache outside the
# checkout, so a fresh clone on the same machine does not rebuild them).
#
# kube-apiserver lives in k8s.io/kubernetes, whose go.mod points its staging
# modules at ./staging/src/...; a throwaway module requires k8s.io/kubernetes
# and replaces each staging module with its published k8s.io/X v0.<minor>.
set -euo pipefail

KUBE_VERSION="${KUBE_VERSION:-v1.37.2}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.16}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="${ROOT}/bin/envtest/${KUBE_VERSION#v}"
CACHE="${AFE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/afe}/envtest/${KUBE_VERSION#v}-etcd-${ETCD_VERSION#v}"

mkdir -p "${OUT}"
have() { [[ -x "${OUT}/kube-apiserver" && -x "${OUT}/etcd" ]]; }
if have; then
	echo "${OUT}"
	exit 0
fi
if [[ -x "${CACHE}/kube-apiserver" && -x "${CACHE}/etcd" ]]; then
	cp "${CACHE}/kube-apiserver" "${CACHE}/etcd" "${OUT}/"
	echo "${OUT}"
	exit 0
fi

work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT
export GOFLAGS="-mod=mod"
export CGO_ENABLED=0

build_apiserver() {
	local dir="${work}/apiserver"
	mkdir -p "${dir}"
	(
		cd "${dir}"
		go mod init afe.dev/envtest-apiserver >/dev/null 2>&1
		local gomod
		gomod="$(go mod download -json "k8s.io/kubernetes@${KUBE_VERSION}" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
		local staging="v0.${KUBE_VERSION#v1.}"
		go mod edit -require="k8s.io/kubernetes@${KUBE_VERSION}"
		# Every "k8s.io/X => ./staging/src/k8s.io/X" becomes "k8s.io/X => k8s.io/X v0.N.P".
		grep -oE '^\s*k8s.io/[a-z0-9-]+ => ./staging/src/k8s.io/[a-z0-9-]+' "${gomod}" | awk '{print $1}' | while read -r m; do
			go mod edit -replace="${m}=${m}@${staging}"
		done
		printf 'package tools\n\nimport _ "k8s.io/kubernetes/cmd/kube-apiserver"\n' >tools.go
		go mod tidy >/dev/null 2>&1 || true
		go build -trimpath -ldflags="-s -w" -o "${OUT}/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
	)
}

build_etcd() {
	local dir="${work}/etcd"
	mkdir -p "${dir}"
	(
		cd "${dir}"
		go mod init afe.dev/envtest-etcd >/dev/null 2>&1
		go mod edit -require="go.etcd.io/etcd/server/v3@${ETCD_VERSION}"
		printf 'package tools\n\nimport _ "go.etcd.io/etcd/server/v3"\n' >tools.go
		go mod tidy >/dev/null 2>&1 || true
		go build -trimpath -ldflags="-s -w" -o "${OUT}/etcd" go.etcd.io/etcd/server/v3
	)
}

echo "Building etcd ${ETCD_VERSION} and kube-apiserver ${KUBE_VERSION} from the Go module proxy (several minutes, once)" >&2
build_etcd
build_apiserver
mkdir -p "${CACHE}"
cp "${OUT}/kube-apiserver" "${OUT}/etcd" "${CACHE}/"
echo "${OUT}"
