#!/usr/bin/env bash
# recipes/quickstart/run.sh - the main job on the default cluster (executor: none), end to end on a bare machine:
# the kit venv, a CPU model venv, a tiny model built and trained here (no downloads from a model hub), then
# `kit generate` starts a `transformers` server as a local process and answers 20 addition problems.
#   CACHE [.cache/quickstart] where the model venv and the tiny model live (reused on the next run)
set -euo pipefail
cd "$(dirname "$0")/../.."
CACHE=$(readlink -m "${CACHE:-.cache/quickstart}")
OUT=$CACHE/out

# Debian/Ubuntu ship venv separately
python3 -c 'import ensurepip' 2>/dev/null || { apt-get update -q && apt-get install -y -q python3-venv; } >/dev/null
[ -x .venv/bin/kit ] || { python3 -m venv .venv && .venv/bin/pip install -q --disable-pip-version-check -e '.[generate]'; }
WITH_VLLM=0 bash tests/services/models_up.sh "$CACHE"

# the server runs in the model venv; kit's own client runs in .venv
KIT_SERVER_PYTHON=$CACHE/venv-model/bin/python HF_HUB_OFFLINE=1 .venv/bin/kit generate --expname=quickstart \
  --server_type=transformers --model="$CACHE/tiny-model" \
  --input_file=recipes/quickstart/problems.jsonl --output_dir="$OUT" --rerun_done \
  ++prompt_config=generic/math ++inference.tokens_to_generate=12 ++max_concurrent_requests=8

.venv/bin/python - "$OUT/output.jsonl" <<'PY'
import json, re, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
right = sum(re.search(r"\\boxed\{(\d+)\}", r["generation"]) is not None
            and re.search(r"\\boxed\{(\d+)\}", r["generation"])[1] == r["expected_answer"] for r in rows)
for r in rows[:3]:
    print(f"{r['problem']!r} -> {r['generation']!r}")
print(f"{right}/{len(rows)} correct; all outputs in {sys.argv[1]}")
PY
