"""`kit run_recipe`: the recipes' --help and dry runs, the stage plan against `.stage.done` keys (skip, rerun of a
changed stage and of every stage after it), and the AIMO recipe end to end with the tiny model on none and once on
the local Slurm."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest
from conftest import SERVICES, TRAIN_ENV, additions, need, plan_lines, slurm_train_config

TOY = ["--sft_args=++max_steps=2 ++max_length=64 ++logging_steps=1",
       "--grpo_args=++max_steps=1 ++num_generations=2 ++micro_batch_size=2 ++max_completion_length=8",
       "--eval_args=++inference.tokens_to_generate=8 ++max_concurrent_requests=8",
       "--benchmarks=arith", "--server_type=transformers"]  # fmt: skip


def aimo_files(tmp_path: Path) -> list[str]:
    cot = additions(tmp_path / "cot.jsonl", 16, 0)
    tir = additions(tmp_path / "tir.jsonl", 16, 1)
    rl = additions(tmp_path / "rl.jsonl", 8, 2, with_generation=False)
    return [f"--cot_data={cot}", f"--tir_data={tir}", f"--rl_data={rl}"]


def test_run_recipe_help_lists_recipes_and_their_parameters(kit):
    res = kit("run_recipe", "--help")
    assert res.returncode == 0 and "aimo" in res.stdout
    res = kit("run_recipe", "aimo", "--help")
    assert res.returncode == 0
    for flag in ("--base_model", "--cot_data", "--tir_data", "--rl_data", "--start_from", "--grpo_args", "--cluster",
                 "--dry_run"):  # fmt: skip
        assert flag in res.stdout, flag


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--start_from=sft"], "--start_from=sft is not a stage; use one of cot_sft, tir_sft, grpo, eval."),
        (["--start_from=eval", "--stop_after=grpo"], "--stop_after=grpo comes before --start_from=eval; swap them."),
        (["--sft_args=max_steps=2"], "--sft_args: 'max_steps=2' is not ++key=value"),
        (["--stop_after=cot_sft", "--cot_data="], "--cot_data is required for stage cot_sft."),
        (["--grpo_args=++max_stepz=1"], "unknown key ++max_stepz. Did you mean ++max_steps?"),
        (["--benchmarks=aime42"], "unknown benchmark 'aime42'"),
    ],
)
def test_bad_recipe_input_is_one_line(kit, tmp_path, args, needle):
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text("{}")
    res = kit("run_recipe", "aimo", f"--base_model={model}", f"--output_dir={tmp_path / 'out'}",
              *aimo_files(tmp_path), *args, "--dry_run")  # fmt: skip
    assert res.returncode == 2, res.stdout + res.stderr
    assert needle in res.stderr and "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_dry_run_plans_and_touches_nothing(kit, tmp_path):
    base = tmp_path / "m"
    base.mkdir()
    (base / "config.json").write_text("{}")
    out, data_dir = tmp_path / "out", tmp_path / "data"
    assert kit("prepare_data", "arith", f"--data_dir={data_dir}").returncode == 0  # the eval stage checks its data
    res = kit("run_recipe", "aimo", f"--base_model={base}", f"--output_dir={out}", *aimo_files(tmp_path), *TOY,
              f"--data_dir={data_dir}", "--start_from=grpo", "--dry_run")  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert plan_lines(res.stderr, "aimo") == {"grpo": "run", "eval": "run"}
    assert "==== job aimo-grpo (none)" in res.stdout and "==== job aimo-eval-done (none)" in res.stdout
    assert "aimo-cot_sft" not in res.stdout and not out.exists()


@pytest.mark.models
def test_aimo_runs_end_to_end_reruns_nothing_and_reruns_from_a_changed_stage(kit, tmp_path):
    need("KIT_TEST_TINY_MODEL", "the tiny model (tests/services/models_up.sh)")
    data_dir = tmp_path / "data"
    assert kit("prepare_data", "arith", f"--data_dir={data_dir}").returncode == 0
    out = tmp_path / "aimo"
    env = {**TRAIN_ENV, "KIT_SERVER_PYTHON": SERVICES["KIT_TEST_HF_PYTHON"]}
    args = ["run_recipe", "aimo", f"--base_model={SERVICES['KIT_TEST_TINY_MODEL']}", f"--output_dir={out}",
            f"--data_dir={data_dir}", *aimo_files(tmp_path), *TOY]  # fmt: skip
    t0 = time.time()
    res = kit(*args, env=env, timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    print(f"aimo recipe on none, all 4 stages: {time.time() - t0:.1f}s")
    assert plan_lines(res.stderr, "aimo") == dict.fromkeys(("cot_sft", "tir_sft", "grpo", "eval"), "run")
    for stage in ("cot_sft", "tir_sft", "grpo"):
        assert (out / stage / "final" / "config.json").is_file(), stage
        trained_from = json.loads((out / stage / "kit-train.json").read_text())
        assert trained_from["model"] == {"cot_sft": SERVICES["KIT_TEST_TINY_MODEL"], "tir_sft": str(out / "cot_sft" / "final"),
                                         "grpo": str(out / "tir_sft" / "final")}[stage]  # fmt: skip
    assert "arith" in json.loads((out / "eval" / "metrics.json").read_text())
    keys = {s: json.loads((out / s / ".stage.done").read_text())["key"] for s in ("cot_sft", "tir_sft", "grpo", "eval")}

    res = kit(*args, env=env)  # the same settings: nothing is submitted
    assert res.returncode == 0, res.stderr
    assert plan_lines(res.stderr, "aimo") == dict.fromkeys(keys, "skip")
    assert "every stage is done with the same settings; nothing to submit" in res.stderr and "job" not in res.stdout

    changed = [a.replace("++max_steps=1", "++max_steps=2") if a.startswith("--grpo_args") else a for a in args]
    res = kit(*changed, env=env, timeout=600)  # GRPO changed: it and eval rerun, the SFT stages are kept
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    assert plan_lines(res.stderr, "aimo") == {"cot_sft": "skip", "tir_sft": "skip", "grpo": "rerun", "eval": "rerun"}
    assert len(list(out.glob("grpo.replaced-*"))) == 1 and len(list(out.glob("eval.replaced-*"))) == 1
    assert (out / "grpo" / "checkpoint-2").is_dir()
    now = {s: json.loads((out / s / ".stage.done").read_text())["key"] for s in keys}
    assert [s for s in keys if now[s] != keys[s]] == ["grpo", "eval"]


@pytest.mark.slurm
@pytest.mark.models
def test_aimo_on_the_local_slurm(kit, configs, tmp_path):
    """The same recipe as one Slurm submission: every stage a job (the eval a het job: server + client) after the
    previous stage's done job; a rerun then submits nothing."""
    need("SLURM_CONF", "the local Slurm cluster")
    need("KIT_TEST_TINY_MODEL", "the tiny model (tests/services/models_up.sh)")
    d = slurm_train_config(configs)
    data_dir = tmp_path / "data"
    assert kit("prepare_data", "arith", f"--data_dir={data_dir}").returncode == 0
    out = tmp_path / "aimo"
    args = ["run_recipe", "aimo", "--cluster=slurm", f"--config_dir={d}", f"--base_model={SERVICES['KIT_TEST_TINY_MODEL']}",
            f"--output_dir={out}", f"--data_dir={data_dir}", *aimo_files(tmp_path), *TOY]  # fmt: skip
    t0 = time.time()
    res = kit(*args, "--wait", timeout=900)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    print(f"aimo recipe on the local Slurm: {time.time() - t0:.1f}s")
    jobs = re.findall(r"job (\S+) (\S+) \(slurm job (\d+)\)", res.stdout)
    assert [name for name, _, _ in jobs] == [f"aimo-{s}{part}" for s in ("cot_sft", "tir_sft", "grpo")
                                              for part in ("", "-done")] + ["aimo-eval-arith", "aimo-eval-summarize",
                                                                            "aimo-eval-done"]  # fmt: skip
    assert {state for _, state, _ in jobs} == {"SUCCEEDED"}, jobs
    times = sacct_times([i for _, _, i in jobs])
    for (_, _, before), (_, _, after) in zip(jobs, jobs[1:], strict=False):
        assert times[after][0] >= times[before][1], (before, after, times)  # each starts once the one before ended
    assert all((out / s / ".stage.done").is_file() for s in ("cot_sft", "tir_sft", "grpo", "eval"))
    res = kit(*args)
    assert res.returncode == 0 and "nothing to submit" in res.stderr and "slurm job" not in res.stdout, res.stderr


def sacct_times(ids: list[str]) -> dict[str, tuple[str, str]]:
    """{job id: (Start, End)} from sacct (ISO times compare as strings)."""
    import subprocess

    out = subprocess.run(["sacct", "-n", "-P", "-X", "-j", ",".join(ids), "-o", "JobID,Start,End"],
                         capture_output=True, text=True, check=True, env={**os.environ, **SERVICES}).stdout  # fmt: skip
    rows = [line.split("|") for line in out.splitlines() if line.strip()]
    return {r[0].split("+")[0]: (r[1], r[2]) for r in rows if "+" not in r[0] or r[0].endswith("+0")}
