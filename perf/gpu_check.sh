#!/usr/bin/env bash
# perf/gpu_check.sh [OUT_FILE [gpu_check.py's options: --only sft,...]] - kit on one GPU (issue 35, part 4), on a machine that has torch and transformers but
# no network: installs kit and what it lacks from wheels carried beside the repo, then runs perf/gpu_check.py, which
# writes tokens/s for `kit sft` and bare TRL, and each command's exit, to OUT_FILE [perf/gpu_check.json]. ~6 min on
# one H100; results: perf/README.md, "GPU check".
#   perf/gpu_check.sh --fetch_wheels   (on a machine with PyPI) fills WHEELS from perf/gpu_check_wheels.txt
# Env: WHEELS [.whl] the wheels' folder (53 MiB; .gitignore lists it); SITE [/tmp/kit-gpu-site] where they install;
#      PYTHON [python3] the interpreter that has torch with CUDA.
set -uo pipefail
cd "$(dirname "$0")/.."
WHEELS=${WHEELS:-.whl}
SITE=${SITE:-/tmp/kit-gpu-site}
PYTHON=${PYTHON:-python3}
PIN_FILE=perf/gpu_check_wheels.txt

if [ "${1:-}" = --fetch_wheels ]; then
  set -e
  mkdir -p "$WHEELS"
  platforms=()
  for p in manylinux_2_34 manylinux_2_31 manylinux_2_28 manylinux_2_27 manylinux_2_24 manylinux_2_17 manylinux2014 manylinux1; do
    platforms+=(--platform "${p}_x86_64")
  done
  "$PYTHON" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp "${platforms[@]}" -d "$WHEELS" -r "$PIN_FILE"
  "$PYTHON" -m pip wheel -q --disable-pip-version-check --no-deps antlr4-python3-runtime==4.9.3 -w "$WHEELS"
  echo "gpu_check.sh: $(ls "$WHEELS" | wc -l) wheels, $(du -sh "$WHEELS" | cut -f1) in $WHEELS"
  exit 0
fi

OUT_FILE=$(readlink -m "${1:-perf/gpu_check.json}")
T0=$(date +%s)
if [ -d "$WHEELS" ]; then
  # --no-deps: the machine's own torch, numpy, pyarrow, accelerate... stay; kit itself is built from this checkout
  "$PYTHON" -m pip install -q --disable-pip-version-check --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$SITE" "$WHEELS"/*.whl &&
    "$PYTHON" -m pip install -q --disable-pip-version-check --no-index --no-deps --no-build-isolation --no-cache-dir \
      --upgrade --target "$SITE" . || { echo "gpu_check.sh: the install from $WHEELS failed" >&2; exit 1; }
  export PYTHONPATH=$SITE${PYTHONPATH:+:$PYTHONPATH} PATH=$SITE/bin:$PATH
  echo "gpu_check.sh: kit and $(ls "$WHEELS" | wc -l) wheels installed in $(($(date +%s) - T0)) s"
fi
command -v kit >/dev/null || { echo "gpu_check.sh: no kit on PATH (pip install -e '.[train,generate,eval]')" >&2; exit 1; }
# a GPU first (torch alone), then every module the steps import, so that a missing wheel is named before anything runs
"$PYTHON" -c 'import sys, torch
torch.cuda.is_available() or sys.exit("gpu_check.sh: torch sees no GPU (run tests/test_gpu_check.py, its CPU rehearsal)")' ||
  exit 1
"$PYTHON" - <<'EOF' || exit 1
import importlib, sys
from pipeline_kit.launch import nemorun_env
nemorun_env._skip_lepton_sdk()  # as kit imports nemo-run: without the Lepton SDK, which is not carried
mods = ["torch", "transformers", "trl", "datasets", "accelerate", "litellm", "math_verify", "hydra", "fastapi",
        "uvicorn", "openai", "transformers.cli.serving", "pipeline_kit.cli.main", *nemorun_env.USED.values()]
missing = []
for m in mods:
    try:
        importlib.import_module(m)
    except Exception as e:  # an ImportError, or a version clash raised while importing
        missing.append(f"{m} ({type(e).__name__}: {e})")
if missing:
    sys.exit("gpu_check.sh: cannot import " + "; ".join(missing))
EOF
PYTHONUNBUFFERED=1 "$PYTHON" perf/gpu_check.py --out "$OUT_FILE" --device cuda "${@:2}"
rc=$?
echo "gpu_check.sh: exit $rc after $(($(date +%s) - T0)) s; results in $OUT_FILE"
exit $rc
