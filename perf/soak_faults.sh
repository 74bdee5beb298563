#!/usr/bin/env bash
# perf/soak_faults.sh [RUNS] [PYTEST -k EXPRESSION] - the fault tests of tests/test_faults.py RUNS times [20], each
# run with its own KIT_FAULT_SEED (1..RUNS), so each fault lands at many points of a run; prints one line per run and
# the seeds that failed (repeat one with KIT_FAULT_SEED=<seed> .venv/bin/python -m pytest tests/test_faults.py).
# The default selection leaves out the `alone` test (it stops a slurmd) and vLLM (`models`, ~1 min a run); add
# them with e.g. `perf/soak_faults.sh 5 "vllm"`. Run it from the repository root.
set -uo pipefail
RUNS=${1:-20}
SELECT=${2:-"not vllm and not slurmd"}
PY=${PYTHON:-.venv/bin/python}
failed=()
for seed in $(seq 1 "$RUNS"); do
  start=$SECONDS
  if KIT_FAULT_SEED=$seed "$PY" -m pytest -q -p no:cacheprovider tests/test_faults.py -k "$SELECT" >"/tmp/soak_faults.$seed.log" 2>&1; then
    echo "seed $seed: passed in $((SECONDS - start)) s"
  else
    echo "seed $seed: FAILED in $((SECONDS - start)) s (/tmp/soak_faults.$seed.log)"
    failed+=("$seed")
  fi
done
echo "$((RUNS - ${#failed[@]})) of $RUNS runs passed${failed[*]:+; failed seeds: ${failed[*]}}"
[ ${#failed[@]} -eq 0 ]
