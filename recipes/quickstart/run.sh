#!/usr/bin/env bash
# recipes/quickstart/run.sh - the main job on the default cluster (executor: none), end to end on a bare machine:
# the kit venv, a CPU model venv and a tiny model built and trained here (tiny_model.sh; no downloads from a model
# hub), the `arith` benchmark made here, then `kit eval` starts a `transformers` server as a local process,
# generates 2 seeds of answers, grades them and prints the summary table.
#   CACHE [.cache/quickstart] where the model venv and the tiny model live (reused on the next run)
set -euo pipefail
cd "$(dirname "$0")/../.."
CACHE=$(readlink -m "${CACHE:-.cache/quickstart}")
OUT=$CACHE/eval

# Debian/Ubuntu ship venv separately
python3 -c 'import ensurepip' 2>/dev/null || { apt-get update -q && apt-get install -y -q python3-venv; } >/dev/null
[ -x .venv/bin/kit ] || python3 -m venv .venv
.venv/bin/python -c 'import litellm, math_verify' 2>/dev/null ||
  .venv/bin/pip install -q --disable-pip-version-check -e '.[generate,eval]'
bash recipes/quickstart/tiny_model.sh "$CACHE"  # the model venv and the tiny model (cached)
.venv/bin/kit prepare_data arith

# the server runs in the model venv; kit's own client runs in .venv
KIT_SERVER_PYTHON=$CACHE/venv-model/bin/python HF_HUB_OFFLINE=1 .venv/bin/kit eval --expname=quickstart \
  --server_type=transformers --model="$CACHE/tiny-model" --benchmarks=arith:2 --output_dir="$OUT" --rerun_done \
  ++inference.tokens_to_generate=12 ++max_concurrent_requests=8
