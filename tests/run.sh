#!/usr/bin/env bash
# tests/run.sh [PYTEST ARGS] - the whole test suite on a fresh Debian/Ubuntu machine (as root): apt deps, the
# project venv (.venv), the real services (Slurm + slurmdbd + sshd, dockerd), then pytest. Services stay up.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tests/services/install_deps.sh
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv || { apt-get install -y -q python3-venv >/dev/null && python3 -m venv .venv; }
fi
.venv/bin/pip install -q --disable-pip-version-check -e '.[test]'
bash tests/services/up.sh
# shellcheck source=/dev/null
source "${KIT_TEST_SERVICES:-/tmp/kit-services}/services.env"
export KIT_TEST_REQUIRE_SERVICES=1
set +e
.venv/bin/python -m pytest -q -ra "$@"
rc=$?
[ "$rc" = 5 ] && { echo "pytest collected no tests" >&2; exit 1; }
exit "$rc"
