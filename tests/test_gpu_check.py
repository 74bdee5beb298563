"""perf/gpu_check.sh and perf/gpu_check.py, the check a GPU machine runs (issue 35, part 4): the same steps on CPU
with a tiny shape, so that the script cannot rot between the rare loans of a GPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import BIN, TRAIN_ENV, need_module

REPO = Path(__file__).resolve().parent.parent


def test_gpu_check_steps_on_cpu(tmp_path):
    """Every step ends well: kit and bare TRL train on the same tokens at a measured rate, DPO and GRPO train (DPO's
    held-out margin read from its log before and after), the eval writes 2 seeds x 4 problems through the
    transformers server."""
    need_module("trl", "pip install -e '.[train]'")
    out = tmp_path / "gpu_check.json"
    res = subprocess.run(
        [sys.executable, "perf/gpu_check.py", "--device=cpu", f"--out={out}", f"--root={tmp_path / 'work'}"],
        cwd=REPO,
        env={**os.environ, **TRAIN_ENV},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    report = json.loads(out.read_text())
    steps = report["steps"]
    assert list(steps) == ["model", "sft", "dpo", "grpo", "eval"] and report["failed"] == []
    assert steps["model"]["dtype"] == "float32" and steps["model"]["parameters"] > 0
    sft = steps["sft"]
    assert sft["same_tokens"] and sft["kit_tokens_per_s"] > 0 and sft["bare_trl_tokens_per_s"] > 0
    assert [run["timed_steps"] for run in sft["runs"].values()] == [[1, 4], [1, 4]]
    dpo = steps["dpo"]
    assert dpo["steps"] == 2 and dpo["pairs_per_s"] > 0 and dpo["tokens"] > 0
    margin = dpo["held_out_margin"]
    assert (
        isinstance(margin["before"], float)
        and isinstance(margin["after"], float)
        and margin["after"] != margin["before"]
    )
    assert steps["grpo"]["steps"] == 2 and steps["grpo"]["completions_per_s"] > 0
    assert steps["eval"]["samples"] == 2 * 4 and "pass@1[avg-of-2]" in steps["eval"]["summary"]


def test_gpu_check_sh_refuses_a_machine_without_a_gpu(tmp_path):
    """Without a GPU the shell script stops before anything runs, in one line, and writes no results."""
    need_module("trl", "pip install -e '.[train]'")
    out = tmp_path / "gpu_check.json"
    # no wheels' folder: nothing to install; kit and the libraries are this venv's
    env = {
        **os.environ,
        "PATH": f"{BIN}:{os.environ['PATH']}",
        "PYTHON": sys.executable,
        "WHEELS": str(tmp_path / "no"),
    }
    res = subprocess.run(["bash", "perf/gpu_check.sh", str(out)], cwd=REPO, env=env, capture_output=True, text=True)
    assert res.returncode == 1
    assert res.stderr.strip().splitlines()[-1] == (
        "gpu_check.sh: torch sees no GPU (run tests/test_gpu_check.py, its CPU rehearsal)"
    )
    assert not out.exists()
