#!/usr/bin/env bash
# tests/setup.sh - everything the test suite needs on a fresh Debian/Ubuntu machine (as root): apt deps, the
# project venv (.venv), and the real services (Slurm + slurmdbd + sshd, dockerd), which stay up.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tests/services/install_deps.sh   # Debian packages: the services', and chromium for tests/test_report.py
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv || { apt-get install -y -q python3-venv >/dev/null && python3 -m venv .venv; }
fi
# torch, pinned (an unpinned one pulls GBs of CUDA wheels): users have it, and nemo-run's import reaches for it,
# so tests/test_launch_imports.py needs it to prove that launching never imports it; `train` (TRL) trains in the tests;
# `docs` builds the docs site (.ci/run, tests/test_docs.py); `wandb` and `mlflow`: kit summarize's trackers, tested offline
.venv/bin/pip install -q --disable-pip-version-check -e '.[test,generate,sandbox,eval,plot,data,train,docs,wandb,mlflow]' torch==2.13.0
bash tests/services/up.sh
