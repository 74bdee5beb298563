"""`kit sft` and `kit grpo` with the TRL backend, for real on CPU with the tiny model: SFT from the untrained model
(loss down, checkpoint loads, `kit eval` on arith better after than before), GRPO with kit's grader as the reward
(reward logged, resume after a kill), the wall-time chain on the local Slurm, and the bad-input errors."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest
from conftest import (
    SERVICES,
    TRAIN_ENV,
    additions,
    kill_after_first_checkpoint,
    need,
    sacct,
    slurm_train_config,
)

SFT_FLAGS = ["++learning_rate=2e-3", "++lr_scheduler=constant_with_warmup", "++warmup_ratio=0.1", "++micro_batch_size=32",
             "++max_length=128"]  # fmt: skip


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
        ({"args": ["++num_generations=3"]}, "not a multiple of ++num_generations=3"),
        ({"args": ["++learning_rat=1e-5"]}, "unknown key ++learning_rat. Did you mean ++learning_rate?"),
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
    command = "grpo" if any("num_generations" in a for a in change.get("args", [])) else "sft"
    if command == "grpo":
        data = additions(tmp_path / "rl.jsonl", 8, 0, with_generation=False)
    res = kit(command, f"--model={model}", f"--training_data={data}", f"--output_dir={tmp_path / 'out'}",
              *change.get("args", []), "++micro_batch_size=4")  # fmt: skip
    assert res.returncode == 2, res.stdout + res.stderr
    assert needle in res.stderr and res.stderr.count("\n") == 1, res.stderr
    assert not (tmp_path / "out").exists()


def test_a_finished_output_dir_says_on_the_command_line_that_nothing_will_be_trained(kit, tmp_path, sft_files):
    model, data = sft_files
    final = tmp_path / "out" / "final"
    final.mkdir(parents=True)
    (final / "config.json").write_text("{}")
    (tmp_path / "out" / "checkpoint-10").mkdir()
    (tmp_path / "out" / "checkpoint-10" / "kit-complete").write_text("10\n")
    args = ["sft", f"--model={model}", f"--training_data={data}", f"--output_dir={tmp_path / 'out'}", "--dry_run"]
    res = kit(*args, "++max_steps=10")
    assert res.returncode == 0, res.stderr
    assert f"kit: warning: this job trains nothing: {final} exists: training is done (step 10)" in res.stderr
    assert "raise ++max_steps above 10 to train on from checkpoint-10" in res.stderr
    assert "warning" not in kit(*args, "++max_steps=20").stderr  # trains on from checkpoint-10


def test_missing_model_folder_names_the_flag(kit, tmp_path, sft_files):
    _, data = sft_files
    res = kit("sft", f"--model={tmp_path / 'nope'}", f"--training_data={data}", f"--output_dir={tmp_path / 'o'}")
    assert res.returncode == 2 and "--model=" in res.stderr and "no such folder" in res.stderr, res.stderr


def test_a_trainer_python_without_the_train_extra_is_one_line(tmp_path, sft_files):
    """The model venv has torch and transformers but neither trl nor kit's own dependencies: the trainer says so in
    one line instead of an import traceback."""
    need("KIT_TEST_HF_PYTHON", "the model venv (tests/services/models_up.sh)")
    model, data = sft_files
    python = SERVICES["KIT_TEST_HF_PYTHON"]
    res = subprocess.run(
        [python, "-m", "pipeline_kit.training.trl_train", "++algorithm=sft", f"++model={model}",
         f"++training_data={data}", f"++output_dir={tmp_path / 'out'}"],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])},
    )  # fmt: skip
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert f"{python} has no trl, datasets, hydra: install the training extra there" in res.stderr, res.stderr
    assert not (tmp_path / "out").exists()


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
        r"\+\+algorithm=sft \+\+backend=trl \+\+model=/models/base \+\+training_data=/data/sft\.jsonl \+\+output_dir=/ckpt/sft "
        r"\+\+learning_rate=1e-5",
        out,
    ), out
    assert "==== job sft-dep1 (slurm)" in out and "---- sbatch --dependency=afterany:<job sft>" in out, out


@pytest.mark.parametrize(
    ("flags", "derived"),
    [
        ([], "++gradient_accumulation_steps=8"),  # one process (no GPU): 1 x 8 steps = one group of 8
        (["--num_gpus=2"], "++gradient_accumulation_steps=4"),  # 2 processes x 1 x 4
        (["--num_gpus=8"], None),  # 8 processes x 1 x 1: the defaults hold as they are
        (["--num_gpus=4", "--num_nodes=2", "++num_generations=16"], "++gradient_accumulation_steps=2"),
        (["--num_gpus=8", "--backend=nemo_rl", "--container=nemo_rl", "++tensor_parallel_size=4"],
         "++gradient_accumulation_steps=4"),  # NeMo-RL: 2 data-parallel ranks of 4 GPUs each
        (["++micro_batch_size=8"], None),  # the user chose the batch: kit leaves it
    ],
)  # fmt: skip
def test_grpo_derives_its_batch_from_num_generations_and_the_gpus(kit, configs, flags, derived):
    """Without ++micro_batch_size or ++gradient_accumulation_steps, kit grpo accumulates enough steps that a step
    holds whole groups of ++num_generations over the trainer's data-parallel processes."""
    d = configs("gpu", "executor: slurm\njob_dir: /lustre/jobs\naccount: acc\npartition: batch\n"
                "containers:\n  nemo_rl: nvcr.io/nvidia/nemo-rl:v0.4.0\n")  # fmt: skip
    res = kit("grpo", "--cluster=gpu", f"--config_dir={d}", "--model=/ckpt/sft/final", "--training_data=/data/rl.jsonl",
              "--output_dir=/ckpt/grpo", "--dry_run", *flags)  # fmt: skip
    assert res.returncode == 0, res.stderr
    found = re.findall(r"\+\+gradient_accumulation_steps=\d+", res.stdout)
    assert set(found) == ({derived} if derived else set()), found


def test_a_grpo_batch_the_user_chose_that_splits_groups_names_the_fix(kit, configs):
    d = configs("gpu", "executor: slurm\njob_dir: /lustre/jobs\naccount: acc\npartition: batch\n")
    res = kit("grpo", "--cluster=gpu", f"--config_dir={d}", "--model=/m", "--training_data=/data/rl.jsonl",
              "--output_dir=/ckpt/grpo", "--num_gpus=2", "--dry_run", "++micro_batch_size=3")  # fmt: skip
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert (
        "++micro_batch_size=3 × ++gradient_accumulation_steps=1 × 2 data-parallel process(es) = 6 completions a "
        "step is not a multiple of ++num_generations=8; make it one (e.g. ++gradient_accumulation_steps=4"
    ) in res.stderr


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
    """Generation-style outputs → kit prepare_sft_data → kit sft (250 steps from random weights at 3e-3: 64% on arith,
    where 400 at 2e-3 gave 74% in 40% more time; 50 steps learn the \\boxed{} format but not yet the sums: 22%) →
    kit eval on arith before (the untrained model) and after (<output_dir>/final)."""
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
              "++max_steps=250", "++save_steps=125", "++logging_steps=10", *SFT_FLAGS, "++learning_rate=3e-3",
              env=TRAIN_ENV, timeout=600)  # fmt: skip
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    print(f"kit sft, 250 steps: {time.time() - t0:.1f}s")
    losses = loss_history(out)
    assert losses[-1] < 0.5 * losses[0], losses
    assert (out / "checkpoint-250" / "kit-complete").is_file() and list((out / "tensorboard").rglob("events.*"))
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
    assert scores["after"] > scores["before"] and scores["after"] >= 50, scores


@pytest.mark.models
def test_sft_with_lora_writes_plain_merged_weights(kit, tmp_path):
    need("KIT_TEST_TINY_MODEL", "the tiny model")
    data = additions(tmp_path / "sft.jsonl", 64, 4)
    out = tmp_path / "lora"
    res = kit("sft", "--expname=lora", f"--model={SERVICES['KIT_TEST_TINY_MODEL']}", f"--training_data={data}",
              f"--output_dir={out}", "++max_steps=10", "++lora_rank=8", "++micro_batch_size=16", "++max_length=128",
              "++report_to=none", env=TRAIN_ENV, timeout=300)  # fmt: skip
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    assert (out / "checkpoint-10" / "adapter_config.json").is_file()  # checkpoints hold the adapter
    assert not (out / "final" / "adapter_config.json").exists()  # the final model is merged
    from transformers import AutoModelForCausalLM

    assert AutoModelForCausalLM.from_pretrained(out / "final").config.model_type == "qwen2"


@pytest.mark.models
def test_a_bf16_base_model_is_saved_in_bf16(kit, tmp_path):
    """Training keeps fp32 master weights (found on an H100: final/ came out fp32, twice the base's size); the final
    model is cast back to the base's dtype."""
    need("KIT_TEST_TINY_MODEL", "the tiny model")
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    base = tmp_path / "bf16"
    AutoModelForCausalLM.from_pretrained(SERVICES["KIT_TEST_TINY_MODEL"], dtype="bfloat16").save_pretrained(base)
    AutoTokenizer.from_pretrained(SERVICES["KIT_TEST_TINY_MODEL"]).save_pretrained(base)
    out = tmp_path / "out"
    res = kit("sft", "--expname=bf16", f"--model={base}", f"--training_data={additions(tmp_path / 'd.jsonl', 8, 5)}",
              f"--output_dir={out}", "++max_steps=2", "++max_length=64", "++report_to=none", env=TRAIN_ENV)  # fmt: skip
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    weights = load_file(str(next((out / "final").glob("*.safetensors"))))
    assert {str(t.dtype) for t in weights.values()} == {"torch.bfloat16"}
    assert json.loads((out / "final" / "config.json").read_text())["dtype"] == "bfloat16"
    checkpoint = load_file(str(next((out / "checkpoint-2").glob("*.safetensors"))))
    assert {str(t.dtype) for t in checkpoint.values()} == {"torch.float32"}  # resumable: the master weights


@pytest.mark.models
def test_a_higher_max_steps_trains_on_from_the_finished_run(kit, tmp_path):
    """A NeMo-Skills habit: the same --output_dir with a higher ++max_steps continues from the newest checkpoint
    (not from scratch, not "done"); its progress lines show on the command line as it trains."""
    need("KIT_TEST_TINY_MODEL", "the tiny model")
    data, out = additions(tmp_path / "d.jsonl", 16, 6), tmp_path / "out"

    def sft(steps: int):
        res = kit("sft", f"--expname=more{steps}", f"--model={SERVICES['KIT_TEST_TINY_MODEL']}",
                  f"--training_data={data}", f"--output_dir={out}", f"++max_steps={steps}", "++logging_steps=1",
                  "++max_length=64", "++micro_batch_size=4", "++report_to=none", env=TRAIN_ENV)  # fmt: skip
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
        return res

    first = sft(3)
    assert re.search(r"^kit train: step 3/3: loss [\d.]+, [\d.]+ s/step, ETA 0 s$", first.stderr, re.M), first.stderr
    before = (out / "final" / "model.safetensors").read_bytes()
    more = sft(5)
    assert "kit train: training on from step 3 to ++max_steps=5" in more.stderr, more.stderr
    assert "resuming from" in more.stderr and "kit train: step 4/5" in more.stderr, more.stderr
    assert "step 1/5" not in more.stderr and len(loss_history(out)) == 5  # steps 1-3 are not done again
    assert (out / "final" / "model.safetensors").read_bytes() != before
    again = kit("sft", f"--model={SERVICES['KIT_TEST_TINY_MODEL']}", f"--training_data={data}", f"--output_dir={out}",
                "++max_steps=5", "++max_length=64", "++micro_batch_size=4", "--dry_run")  # fmt: skip
    assert "this job trains nothing" in again.stderr and "raise ++max_steps above 5" in again.stderr, again.stderr


@pytest.mark.models
def test_grpo_rewards_with_the_grader_and_resumes_after_a_kill(kit, tmp_path, user_repo):
    need("KIT_TEST_TINY_MODEL", "the tiny model")
    data = additions(tmp_path / "rl.jsonl", 64, 2, with_generation=False)
    out = tmp_path / "grpo"
    args = ["grpo", "--expname=grpo", f"--model={SERVICES['KIT_TEST_TINY_MODEL']}", f"--training_data={data}",
            f"--output_dir={out}", "++max_steps=8", "++save_steps=2", "++logging_steps=1", "++micro_batch_size=8",
            "++num_generations=4", "++max_completion_length=8", "++learning_rate=1e-4", "++eval_steps=4",
            "++eval_size=16", "++average_last=2"]  # fmt: skip
    env = {**os.environ, **SERVICES, **TRAIN_ENV, "KIT_HOME": str(tmp_path / "home" / ".kit")}
    done = kill_after_first_checkpoint(args, out, user_repo, env)

    res = kit(*args, env=TRAIN_ENV, timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    log = res.stderr  # the trainer's kit lines, shown as it ran
    assert f"resuming from {out}/checkpoint-{done[-1]} (step {done[-1]})" in log, log[-3000:]
    # one line per logging step with the reward, the grader's accuracy and the boxed rate, not the loss alone
    number = r"-?[\d.]+(?:e-?\d+)?"
    progress = rf"^kit train: step \d/8: loss {number}, reward {number}, accuracy {number}, boxed {number}, "
    assert re.search(progress, log, re.M), log[-3000:]
    state = json.loads((out / "checkpoint-8" / "trainer_state.json").read_text())
    rewards = [e for e in state["log_history"] if "reward" in e]
    assert rewards and all(-0.5001 <= e["reward"] <= 1.1001 for e in rewards), rewards
    assert any("eval/accuracy" in e for e in state["log_history"]) and (out / "final" / "config.json").is_file()
    # ++average_last=2: the final weights are the mean of checkpoint-6's and the last step's (checkpoint-8)
    from safetensors.torch import load_file

    six, eight, final = (
        load_file(str(p / "model.safetensors")) for p in (out / "checkpoint-6", out / "checkpoint-8", out / "final")
    )
    assert all(torch_close(final[k], (six[k].double() + eight[k].double()) / 2) for k in final)
    assert any(not torch_close(six[k], eight[k]) for k in final)  # the two differ: the mean is no copy


def torch_close(a, b) -> bool:
    return bool(((a.double() - b.double()).abs() <= 1e-6 + 1e-5 * b.double().abs()).all())


NO_LIMIT_STEPS = 1_000_000  # a step count no job reaches within a 1-minute limit, however fast this machine is
TRAINED_STEPS = 250  # enough for the tiny model to answer arith (constant learning rate)


def slurm_logs(job_dir: Path, job: str) -> list[str]:
    """The trainer logs of `job` of experiment wt, one per run, oldest first (run ids start with the time)."""
    return [p.read_text() for p in sorted(job_dir.rglob(f"logs/wt/*/{job}/trainer.log"))]


@pytest.mark.slurm
@pytest.mark.models
def test_sft_on_slurm_saves_on_the_signal_and_the_next_job_resumes(kit, configs, tmp_path):
    """A 1-minute limit and a step count no job reaches within it, so nothing depends on how fast this machine
    trains (a run sized by a pace measured first failed when the load changed in between): the first job gets
    SIGUSR1 before its limit, saves, and is stopped by the limit (TIMEOUT). slurmctld sends the signal at its first
    time-limit check (every 30 s) within N + 30 s of the end, so --save_before_timeout=30 could send it as the job
    started, before the trainer had a handler (its shells ignore USR1, so it was lost); with 1 it comes 29-59 s
    after the start, and the limit's kill one check later. The next job of the --dependent_jobs
    chain resumes from the newest complete checkpoint (its log names the step) and is stopped too. A rerun without
    the limit, ++max_steps lowered to what the model needs (at least a few steps past that checkpoint), trains on
    from the newest checkpoint and publishes final/; its dependent copy finds the training done. A `kit eval
    --run_after=wt`, submitted while that run is queued, starts after it and scores <output_dir>/final."""
    need("SLURM_CONF", "the local Slurm cluster")
    data = additions(tmp_path / "sft.jsonl", 400, 3)
    d = slurm_train_config(configs)
    data_dir = tmp_path / "data"
    assert kit("prepare_data", "arith", f"--data_dir={data_dir}").returncode == 0
    out = tmp_path / "wt"
    # a constant learning rate: the steps the chain took count whatever ++max_steps the run that finishes has
    flags = [f"--model={tiny_init()}", f"--training_data={data}", f"--output_dir={out}", "++save_steps=100000",
             "++logging_steps=100", "++report_to=none", *SFT_FLAGS, "++warmup_ratio=0"]  # fmt: skip
    res = kit("sft", "--cluster=slurm", f"--config_dir={d}", "--expname=wt", "--time_min=1", "--dependent_jobs=1",
              "--save_before_timeout=1", "--wait", "--wait_timeout=900", *flags, f"++max_steps={NO_LIMIT_STEPS}",
              timeout=1000)  # fmt: skip
    chain = dict(re.findall(r"job (\S+) \S+ \(slurm job (\d+)\)", res.stdout))
    assert set(chain) == {"wt", "wt-dep1"}, res.stdout + res.stderr
    [first], [second] = slurm_logs(configs.job_dir, "wt"), slurm_logs(configs.job_dir, "wt-dep1")
    saved = re.search(r"SIGUSR1 received .*: saving checkpoint-(\d+)", first)
    assert saved and f"saved {out}/checkpoint-{saved[1]}" in first, first[-3000:]
    resumed = re.search(rf"resuming from {out}/checkpoint-(\d+) \(step (\d+)\)", second)
    assert resumed and int(resumed[2]) >= int(saved[1]), second[-3000:]
    newest = max(int(p.name.split("-")[1]) for p in out.glob("checkpoint-*") if (p / "kit-complete").exists())
    steps = max(newest + 5, TRAINED_STEPS)
    res = kit("sft", "--cluster=slurm", f"--config_dir={d}", "--expname=wt", "--dependent_jobs=1", *flags,
              f"++max_steps={steps}")  # fmt: skip
    finish = dict(re.findall(r"job (\S+) \S+ \(slurm job (\d+)\)", res.stdout))
    assert set(finish) == {"wt", "wt-dep1"}, res.stdout + res.stderr
    res = kit("eval", "--cluster=slurm", f"--config_dir={d}", "--expname=wt-eval", "--run_after=wt", "--wait",
              "--server_type=transformers", f"--model={out}/final", "--benchmarks=arith", f"--data_dir={data_dir}",
              f"--output_dir={tmp_path / 'eval'}", "++inference.tokens_to_generate=12", "++max_concurrent_requests=8",
              timeout=1200)  # fmt: skip
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    evals = dict(re.findall(r"job (\S+) \S+ \(slurm job (\d+)\)", res.stdout))
    ids = {**{f"chain-{k}": v for k, v in chain.items()}, **{f"finish-{k}": v for k, v in finish.items()}, **evals}
    by_id: dict[str, list[str]] = {}  # a het job's components (ID+0, ID+1) share its id: the first one's row
    for row in sorted(sacct(list(ids.values()), "Start"), key=lambda row: row["JobID"]):
        by_id.setdefault(row["JobID"].split("+")[0], [row["State"], row["Start"], row["End"]])
    rows = {name: by_id[job_id] for name, job_id in ids.items()}
    states = {name: row[0] for name, row in rows.items()}
    assert states["chain-wt"] == states["chain-wt-dep1"] == "TIMEOUT", (states, first[-2000:], second[-2000:])
    # the rerun trained on from the chain's newest checkpoint to the step count, and published final/
    [_, finisher], [_, after] = slurm_logs(configs.job_dir, "wt"), slurm_logs(configs.job_dir, "wt-dep1")
    assert f"resuming from {out}/checkpoint-{newest} (step {newest})" in finisher, finisher[-3000:]
    assert f"trained to step {steps}" in finisher and f"kit train: saved {out}/final" in finisher, finisher[-3000:]
    final_state = json.loads((out / f"checkpoint-{steps}" / "trainer_state.json").read_text())
    assert final_state["global_step"] == steps and (out / "final" / "config.json").is_file()
    assert states["finish-wt-dep1"] == "COMPLETED" and "training is done" in after, after[-3000:]
    # the eval ran after the run it was submitted after, on the trained model
    eval_starts = [row[1] for name, row in rows.items() if name.startswith("wt-eval")]
    assert eval_starts and min(eval_starts) >= max(rows[n][2] for n in ("finish-wt", "finish-wt-dep1")), rows
    metrics = json.loads((tmp_path / "eval" / "metrics.json").read_text())["arith"]
    assert next(iter(metrics.values()))["symbolic_correct"] >= 50, metrics


def test_help_lists_the_override_keys_and_never_cuts_an_option_name(kit):
    for command in ("sft", "grpo"):
        text = kit(command, "--help", env={"COLUMNS": "80"}).stdout
        words = " ".join(text.split())
        assert "++key=value overrides" in words and "learning_rate" in words and "reward.correct" in words, text
        assert "--save_before_timeout" in text and "…" not in text, text
