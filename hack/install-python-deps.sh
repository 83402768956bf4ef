#!/usr/bin/env bash
# Installs Debian's python3-kubernetes and python3-pytest when Debian's own
# interpreter (/usr/bin/python3) cannot import them: the Python client
# (clients/python) needs the first, its tests the second; with them
# python3-pip, python3-setuptools, python3-wheel and python3-venv, with which
# a test installs the package as a user would (pip install
# --no-build-isolation, in a venv that sees Debian's packages). No Python
# package index is reachable, so all come from the machine's configured
# Debian mirror through apt, like hack/install-prometheus.sh's prometheus.
# `make python-deps` runs it before `make test`. Another Python may come
# first on PATH and not see Debian's packages: everything here names
# /usr/bin/python3. Idempotent: with both importable it installs nothing.
set -euo pipefail

die() { echo "install-python-deps: $*" >&2; exit 1; }

python=/usr/bin/python3
[[ -x "${python}" ]] || die "${python} is missing: install Debian's python3"
modules='import kubernetes, pytest, setuptools, wheel, ensurepip, venv, pip'
if "${python}" -c "${modules}" >/dev/null 2>&1; then
	exit 0
fi
[[ "$(id -u)" == 0 ]] || die "python3-kubernetes, python3-pytest or a package of pip's is missing: install them (apt-get install --no-install-recommends python3-kubernetes python3-pytest python3-pip python3-setuptools python3-wheel python3-venv), or run this as root"
command -v apt-get >/dev/null || die "python3-kubernetes, python3-pytest or a package of pip's is missing and there is no apt-get"

echo "install-python-deps: installing Debian's python3-kubernetes and python3-pytest"
export DEBIAN_FRONTEND=noninteractive
packages=(python3-kubernetes python3-pytest python3-pip python3-setuptools python3-wheel python3-venv)
apt-get install -y --no-install-recommends "${packages[@]}" >/dev/null 2>&1 || {
	apt-get update >/dev/null
	apt-get install -y --no-install-recommends "${packages[@]}" >/dev/null
}
"${python}" -c "${modules}" || die "the packages installed, yet ${python} cannot import them: ${modules}"
echo "install-python-deps: kubernetes $("${python}" -c 'import kubernetes; print(kubernetes.__version__)'), pytest $("${python}" -c 'import pytest; print(pytest.__version__)')"
