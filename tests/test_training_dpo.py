"""`kit dpo` with the TRL backend: bad pairs and settings as one line before anything is queued, the trainer's
command in a dry run, and for real on CPU with the tiny model: the chosen-over-rejected margin on held-out pairs
rises (read from the trainer's log), and a run killed mid-way resumes from its newest checkpoint."""

from __future__ import annotations

import json
import os
import re

import pytest
from conftest import SERVICES, TRAIN_ENV, kill_after_first_checkpoint, need, preference_pairs


@pytest.fixture
def dpo_files(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    return model, preference_pairs(tmp_path / "pairs.jsonl", 8, 0)


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"line": '{"problem": "1+1?", "chosen": "2"}'},
         "pairs.jsonl:9: the record has no 'rejected' text or assistant message; DPO needs prompt (or problem), chosen "
         "and rejected on every line (kit run_recipe magpie_math writes them in pairs/preference_pairs.jsonl)."),
        ({"line": '{"chosen": "2", "rejected": "3"}'}, "pairs.jsonl:9: the record has no 'prompt' or 'problem'"),
        ({"line": '{"prompt": "1+1?", "chosen": [{"role": "user", "content": "2"}], "rejected": "3"}'},
         "pairs.jsonl:9: the record has no 'chosen' text or assistant message"),
        ({"args": ["++loss_type=sigmod"]}, "++loss_type=sigmod is not one of TRL's DPO losses. Did you mean 'sigmoid'?"),
        ({"args": ["++beta=0"]}, "++beta=0.0: DPO's beta must be above 0 (0.1 is usual)."),
        ({"args": ["++num_generations=4"]}, "++num_generations is a GRPO setting; drop it for kit dpo."),
        ({"args": ["++ref_model=/no/such/model"]}, "++ref_model=/no/such/model: no such folder"),
        ({"args": ["++los_type=ipo"]}, "unknown key ++los_type. Did you mean ++loss_type?"),
        ({"command": "sft", "args": ["++loss_type=ipo"]}, "++loss_type is a DPO setting; drop it for kit sft."),
        ({"command": "grpo", "args": ["++ref_model=/m"]}, "++ref_model is a DPO setting; drop it for kit grpo."),
    ],
)  # fmt: skip
def test_bad_dpo_input_is_one_line(kit, tmp_path, dpo_files, change, needle):
    model, data = dpo_files
    if "line" in change:
        with data.open("a") as f:
            f.write(change["line"] + "\n")
    res = kit(change.get("command", "dpo"), f"--model={model}", f"--training_data={data}",
              f"--output_dir={tmp_path / 'out'}", *change.get("args", []))  # fmt: skip
    assert res.returncode == 2, res.stdout + res.stderr
    assert needle in res.stderr and res.stderr.count("\n") == 1, res.stderr
    assert not (tmp_path / "out").exists()


def test_a_file_of_sft_records_is_refused_in_one_line(kit, tmp_path, dpo_files):
    model, _ = dpo_files
    sft = tmp_path / "sft.jsonl"
    sft.write_text(json.dumps({"problem": "1+1?", "generation": "\\boxed{2}"}) + "\n")
    res = kit("dpo", f"--model={model}", f"--training_data={sft}", f"--output_dir={tmp_path / 'out'}")
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert f"{sft}:1: the record has no 'chosen' text or assistant message" in res.stderr, res.stderr


def test_the_dry_run_shows_the_trainer_with_an_absolute_reference_model(kit, tmp_path, user_repo, dpo_files):
    model, data = dpo_files
    ref = user_repo / "ref"
    ref.mkdir()
    (ref / "config.json").write_text("{}")
    res = kit("dpo", f"--model={model}", f"--training_data={data}", f"--output_dir={tmp_path / 'out'}",
              "++ref_model=ref", "++beta=0.2", "++loss_type=ipo", "--dry_run")  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert (
        f"-m pipeline_kit.training.trl_train ++algorithm=dpo ++backend=trl ++model={model} ++training_data={data} "
        f"++output_dir={tmp_path / 'out'} ++ref_model={ref} ++beta=0.2 ++loss_type=ipo"
    ) in res.stdout, res.stdout


def test_a_slurm_chain_saves_on_the_signal_and_a_finished_run_warns(kit, configs, tmp_path, dpo_files):
    """The sft path's wall-time handling: Slurm's early-warning signal and --dependent_jobs copies; an output folder
    whose training is done says so at submission."""
    d = configs("gpu", "executor: slurm\njob_dir: /lustre/jobs\naccount: acc\npartition: batch\n")
    res = kit("dpo", "--cluster=gpu", f"--config_dir={d}", "--expname=dpo", "--model=/models/sft",
              "--training_data=/data/pairs.jsonl", "--output_dir=/ckpt/dpo", "--num_gpus=8", "--dependent_jobs=1",
              "--time_min=04:00:00", "--dry_run")  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("#SBATCH --signal=USR1@120") == 2, res.stdout
    assert "==== job dpo-dep1 (slurm)" in res.stdout and "---- sbatch --dependency=afterany:<job dpo>" in res.stdout
    assert "--nproc_per_node=8 -m pipeline_kit.training.trl_train ++algorithm=dpo" in res.stdout, res.stdout

    model, data = dpo_files
    out = tmp_path / "out"
    (out / "final").mkdir(parents=True)
    (out / "final" / "config.json").write_text("{}")
    (out / "checkpoint-6").mkdir()
    (out / "checkpoint-6" / "kit-complete").write_text("6\n")
    res = kit("dpo", f"--model={model}", f"--training_data={data}", f"--output_dir={out}", "++max_steps=6", "--dry_run")
    assert res.returncode == 0, res.stderr
    assert f"kit: warning: this job trains nothing: {out / 'final'} exists: training is done (step 6)" in res.stderr


def margins(output_dir, step: int) -> dict[int, float]:
    """Step -> the policy's log-prob margin of chosen over rejected on the held-out pairs, from the trainer's log
    (trainer_state.json of checkpoint-`step`: the log of every run that led to it)."""
    state = json.loads((output_dir / f"checkpoint-{step}" / "trainer_state.json").read_text())
    return {
        e["step"]: e["eval_logps/chosen"] - e["eval_logps/rejected"]
        for e in state["log_history"]
        if "eval_logps/chosen" in e
    }


@pytest.mark.models
def test_dpo_raises_the_held_out_margin_and_resumes_after_a_kill(kit, tmp_path, user_repo):
    need("KIT_TEST_TINY_MODEL", "the tiny model")
    data = preference_pairs(tmp_path / "pairs.jsonl", 64, 1)
    held = preference_pairs(tmp_path / "held.jsonl", 16, 2, held_out_from=data)  # problems the training has not
    out = tmp_path / "dpo"
    steps = 24
    args = ["dpo", "--expname=dpo", f"--model={SERVICES['KIT_TEST_TINY_MODEL']}", f"--training_data={data}",
            f"--output_dir={out}", f"++max_steps={steps}", "++save_steps=2", "++logging_steps=1",
            "++micro_batch_size=8", "++learning_rate=2e-4", "++lr_scheduler=constant", f"++eval_steps={steps}",
            f"++eval_data={held}", "++report_to=none"]  # fmt: skip
    env = {**os.environ, **SERVICES, **TRAIN_ENV, "KIT_HOME": str(tmp_path / "home" / ".kit")}
    done = kill_after_first_checkpoint(args, out, user_repo, env)

    res = kit(*args, env=TRAIN_ENV, timeout=300)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    assert f"resuming from {out}/checkpoint-{done[-1]} (step {done[-1]})" in res.stderr, res.stderr[-3000:]
    assert "step 1/" not in res.stderr  # the steps before the checkpoint are not trained again
    assert (out / "final" / "config.json").is_file()
    by_step = margins(out, steps)
    print(f"held-out log-prob margin of chosen over rejected, by step: {by_step}")
    assert sorted(by_step) == [0, steps], by_step  # before the first step (the killed run) and after the last
    assert by_step[steps] > by_step[0] + 0.5, by_step
    assert f"kit train: step {steps}/{steps}: held-out pairs: log-prob margin {by_step[steps]:.4g}" in res.stderr
    # a line per logging step: the loss with the step's reward margin and pair accuracy
    number = r"-?[\d.]+(?:e-?\d+)?"
    line = rf"^kit train: step {steps}/{steps}: loss {number}, reward margin {number}, pair accuracy {number}, "
    assert re.search(line, res.stderr, re.M), res.stderr[-3000:]
