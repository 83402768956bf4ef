#!/usr/bin/env bash
# Installs Debian's python3-kubernetes and python3-pytest when Debian's own
# interpreter (/usr/bin/python3) cannot import them: the Python client
# (clients/python) needs the first, its tests the second, and no Python
# package index is reachable, so both come from the machine's configured
# Debian mirror through apt, like hack/install-prometheus.sh's prometheus.
# `make python-deps` runs it before `make test`. Another Python may come
# first on PATH and not see Debian's packages: everything here names
# /usr/bin/python3. Idempotent: with both importable it installs nothing.
set -euo pipefail

die() { echo "install-python-deps: $*" >&2; exit 1; }

python=/usr/bin/python3
[[ -x "${python}" ]] || die "${python} is missing: install Debian's python3"
if "${python}" -c 'import kubernetes, pytest' >/dev/null 2>&1; then
	exit 0
fi
[[ "$(id -u)" == 0 ]] || die "python3-kubernetes or python3-pytest is missing: install them (apt-get install --no-install-recommends python3-kubernetes python3-pytest), or run this as root"
command -v apt-get >/dev/null || die "python3-kubernetes or python3-pytest is missing and there is no apt-get"

echo "install-python-deps: installing Debian's python3-kubernetes and python3-pytest"
export DEBIAN_FRONTEND=noninteractive
packages=(python3-kubernetes python3-pytest)
apt-get install -y --no-install-recommends "${packages[@]}" >/dev/null 2>&1 || {
	apt-get update >/dev/null
	apt-get install -y --no-install-recommends "${packages[@]}" >/dev/null
}
"${python}" -c 'import kubernetes, pytest' || die "the packages installed, yet ${python} cannot import kubernetes and pytest"
echo "install-python-deps: kubernetes $("${python}" -c 'import kubernetes; print(kubernetes.__version__)'), pytest $("${python}" -c 'import pytest; print(pytest.__version__)')"
