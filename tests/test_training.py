"""`kit sft` and `kit grpo` with the TRL backend, for real on CPU with the tiny model: SFT from the untrained model
(loss down, checkpoint loads, `kit eval` on arith better after than before), GRPO with kit's grader as the reward
(reward logged, resume after a kill), the wall-time chain on the local Slurm, and the bad-input errors."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import BIN, SERVICES, need

TRAIN_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
SFT_FLAGS = ["++learning_rate=3e-3", "++micro_batch_size=32", "++max_length=128", "++warmup_ratio=0.1"]


def additions(path: Path, n: int, seed: int, with_generation: bool = True) -> Path:
    """n records 'What is a+b?' (as generation outputs: graded, correct) over all 100 single-digit pairs."""
    rng = random.Random(seed)
    with path.open("w") as f:
        for i in range(n):
            a, b = rng.randrange(10), rng.randrange(10)
            record = {"id": f"p{i}", "problem": f"What is {a}+{b}?", "expected_answer": str(a + b)}
            if with_generation:
                record |= {"generation": f"\\boxed{{{a + b}}}", "symbolic_correct": True}
            f.write(json.dumps(record) + "\n")
    return path


def loss_history(output_dir: Path) -> list[float]:
    """The logged training losses of the newest checkpoint's trainer_state.json."""
    newest = max(output_dir.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
    state = json.loads((newest / "trainer_state.json").read_text())
    return [e["loss"] for e in state["log_history"] if "loss" in e]


def tiny_init() -> str:
    need("KIT_TEST_TINY_INIT", "the untrained tiny model (tests/services/models_up.sh)")
    return SERVICES["KIT_TEST_TINY_INIT"]


# ---- bad input: one line, exit 2, nothing queued


@pytest.fixture
def sft_files(tmp_path):
    data = additions(tmp_path / "sft.jsonl", 8, 0)
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    return model, data


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"line": '{"problem": "What is 1+1?"}'}, "sft.jsonl:9: the record has no 'generation' string"),
        ({"model": "missing"}, "--model="),
        ({"args": ["++num_generations=3"]}, "not a multiple of ++num_generations=3"),
        ({"args": ["++learning_rat=1e-5"]}, "unknown key ++learning_rat. Did you mean 'learning_rate'?"),
        ({"args": ["++model=/elsewhere"]}, "++model is set by kit; use --model instead"),
        ({"args": ["--num_nodes=2"]}, "--num_nodes=2 needs a Slurm cluster"),
        ({"args": ["--backend=megatron"]}, "--backend=megatron is not one of trl, nemo_rl"),
    ],
)
def test_bad_training_input_is_one_line(kit, tmp_path, sft_files, change, needle):
    model, data = sft_files
    if "line" in change:
        with data.open("a") as f:
            f.write(change["line"] + "\n")
    if "model" in change:
        model = tmp_path / change["model"]
    command = "grpo" if any("num_generations" in a for a in change.get("args", [])) else "sft"
    if command == "grpo":
        data = additions(tmp_path / "rl.jsonl", 8, 0, with_generation=False)
    res = kit(command, f"--model={model}", f"--training_data={data}", f"--output_dir={tmp_path / 'out'}",
              *change.get("args", []), "++micro_batch_size=4")  # fmt: skip
    assert res.returncode == 2, res.stdout + res.stderr
    assert needle in res.stderr and res.stderr.count("\n") == 1, res.stderr
    assert not (tmp_path / "out").exists()


def test_missing_model_folder_names_the_flag(kit, tmp_path, sft_files):
    _, data = sft_files
    res = kit("sft", f"--model={tmp_path / 'nope'}", f"--training_data={data}", f"--output_dir={tmp_path / 'o'}")
    assert res.returncode == 2 and "--model=" in res.stderr and "no such folder" in res.stderr, res.stderr


# ---- what goes out on a GPU cluster (no GPU here: the exact command lines)


def test_multi_node_sft_renders_torchrun_and_asks_slurm_for_the_signal(kit, configs, tmp_path):
    d = configs("gpu", "executor: slurm\njob_dir: /lustre/jobs\naccount: acc\npartition: batch\n")
    res = kit("sft", "--cluster=gpu", f"--config_dir={d}", "--model=/models/base", "--training_data=/data/sft.jsonl",
              "--output_dir=/ckpt/sft", "--num_gpus=8", "--num_nodes=2", "--dependent_jobs=1", "--time_min=04:00:00",
              "--save_before_timeout=300", "--dry_run", "++learning_rate=1e-5")  # fmt: skip
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "#SBATCH --signal=USR1@300" in out and out.count("#SBATCH --nodes=2") == 2, out
    assert re.search(
        r"-m torch\.distributed\.run --nnodes=2 --nproc_per_node=8 --node_rank=\"\$\{SLURM_NODEID:-0\}\" "
        r"--master_addr=\"\$\{KIT_SERVER_HEAD:-.*\}\" --master_port=29500 -m pipeline_kit\.training\.trl_train "
        r"\+\+algorithm=sft \+\+model=/models/base \+\+training_data=/data/sft\.jsonl \+\+output_dir=/ckpt/sft "
        r"\+\+learning_rate=1e-5",
        out,
    ), out
    assert "--dependency=afterany:" in out or "sft-dep1" in out


def test_grpo_with_a_vllm_server_is_a_het_job(kit, configs):
    """TRL's server mode: `trl vllm-serve` in its own group, the trainer pointed at it. Not run here: TRL sends
    the new weights over vLLM's NCCL weight-transfer engine, which needs CUDA (trl/generation/vllm_client.py)."""
    d = configs("gpu", "executor: slurm\njob_dir: /lustre/jobs\naccount: acc\npartition: batch\n")
    res = kit("grpo", "--cluster=gpu", f"--config_dir={d}", "--model=/ckpt/sft/final", "--training_data=/data/rl.jsonl",
              "--output_dir=/ckpt/grpo", "--num_gpus=4", "--vllm_server_gpus=2", "--dry_run",
              "++num_generations=16", "++micro_batch_size=16", "++learning_rate=1e-6")  # fmt: skip
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "#SBATCH hetjob" in out, out
    assert re.search(r"-m trl\.scripts\.vllm_serve --model /ckpt/sft/final --host 0\.0\.0\.0 --port \$KIT_PORT "
                     r"--tensor_parallel_size 2", out), out  # fmt: skip
    assert re.search(r'"\+\+vllm_server=http://\$\{het_group_host_1\}:\d+"', out), out
    assert "--standalone --nnodes=1 --nproc_per_node=4 -m pipeline_kit.training.trl_train" in out


# ---- real training on CPU


@pytest.mark.models
def test_sft_on_none_learns_and_kit_eval_scores_higher(kit, tmp_path):
    """Generation-style outputs → kit prepare_sft_data → kit sft (≈100 steps from random weights) → kit eval on
    arith before (the untrained model) and after (<output_dir>/final)."""
    base = tiny_init()
    gen = tmp_path / "gen"
    gen.mkdir()
    additions(gen / "output.jsonl", 600, 1)
    data = tmp_path / "sft.jsonl"
    res = kit("prepare_sft_data", f"--input_dir={gen}", f"--output_file={data}", "--no_decontaminate")
    assert res.returncode == 0, res.stderr
    out = tmp_path / "sft"
    t0 = time.time()
    res = kit("sft", "--expname=sft", f"--model={base}", f"--training_data={data}", f"--output_dir={out}",
              "++max_steps=100", "++save_steps=50", "++logging_steps=10", *SFT_FLAGS, env=TRAIN_ENV, timeout=600)  # fmt: skip
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    print(f"kit sft, 100 steps: {time.time() - t0:.1f}s")
    losses = loss_history(out)
    assert losses[-1] < 0.5 * losses[0], losses
    assert (out / "checkpoint-100" / "kit-complete").is_file() and list((out / "tensorboard").rglob("events.*"))
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(out / "final")
    assert model.config.model_type == "qwen2" and AutoTokenizer.from_pretrained(out / "final").chat_template

    data_dir = tmp_path / "data"
    assert kit("prepare_data", "arith", f"--data_dir={data_dir}").returncode == 0
    scores = {}
    for name, path in (("before", base), ("after", out / "final")):
        res = kit("eval", f"--expname=eval-{name}", "--server_type=transformers", f"--model={path}",
                  "--benchmarks=arith", f"--data_dir={data_dir}", f"--output_dir={tmp_path / name}",
                  "++inference.tokens_to_generate=12", "++max_concurrent_requests=8",
                  env={**TRAIN_ENV, "KIT_SERVER_PYTHON": SERVICES["KIT_TEST_HF_PYTHON"]}, timeout=600)  # fmt: skip
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
        metrics = json.loads((tmp_path / name / "metrics.json").read_text())["arith"]
        scores[name] = next(iter(metrics.values()))["symbolic_correct"]
    print(f"arith greedy accuracy: {scores}")
    assert scores["after"] > scores["before"] and scores["after"] >= 20, scores


@pytest.mark.models
def test_grpo_rewards_with_the_grader_and_resumes_after_a_kill(kit, tmp_path, user_repo):
    need("KIT_TEST_TINY_MODEL", "the tiny model")
    data = additions(tmp_path / "rl.jsonl", 64, 2, with_generation=False)
    out = tmp_path / "grpo"
    args = ["grpo", "--expname=grpo", f"--model={SERVICES['KIT_TEST_TINY_MODEL']}", f"--training_data={data}",
            f"--output_dir={out}", "++max_steps=8", "++save_steps=2", "++logging_steps=1", "++micro_batch_size=8",
            "++num_generations=4", "++max_completion_length=8", "++learning_rate=1e-4", "++eval_steps=4",
            "++eval_size=16"]  # fmt: skip
    home = tmp_path / "home" / ".kit"  # the kit fixture's
    env = {**os.environ, **SERVICES, **TRAIN_ENV, "KIT_HOME": str(home)}
    proc = subprocess.Popen([str(BIN / "kit"), *args], cwd=user_repo, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)  # fmt: skip
    deadline = time.time() + 240
    while not list(out.glob("checkpoint-*/kit-complete")) and time.time() < deadline and proc.poll() is None:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)  # the whole job, no chance to save
    proc.wait()
    done = sorted(int(p.parent.name.split("-")[1]) for p in out.glob("checkpoint-*/kit-complete"))
    assert done and not (out / "final").exists(), (done, proc.stdout.read()[-3000:])

    res = kit(*args, env=TRAIN_ENV, timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    log = res.stdout + res.stderr + "".join(p.read_text() for p in home.rglob("trainer.log"))
    assert f"resuming from {out}/checkpoint-{done[-1]} (step {done[-1]})" in log, log[-3000:]
    state = json.loads((out / "checkpoint-8" / "trainer_state.json").read_text())
    rewards = [e for e in state["log_history"] if "reward" in e]
    assert rewards and all(-0.5 <= e["reward"] <= 1.1 for e in rewards), rewards
    assert any("eval/accuracy" in e for e in state["log_history"]) and (out / "final" / "config.json").is_file()
