"""`kit sft/grpo/dpo --backend=nemo_rl`: no GPU or NeMo-RL container here, so (1) the keys of the run config kit writes are
checked against NeMo-RL's own example configs (tests/fixtures/nemo_rl, which names the commit), (2) the job scripts
are golden dry runs (tests/test_dry_run_golden.py), and (3) the in-job side runs for real on none against a stand-in
`uv` (tests/fake_nemo_rl/uv) that logs the exact command lines and leaves checkpoints as NeMo-RL would."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from conftest import BIN, SERVICES, need

FIXTURES = Path(__file__).parent / "fixtures" / "nemo_rl"
FAKE_UV = Path(__file__).parent / "fake_nemo_rl" / "uv"
# keys a dataset entry passes to NeMo-RL's dataset class as kwargs (its example configs name a hub dataset instead)
DATASET_KWARGS = {"data_path", "input_key", "output_key"}


def example_keys(name: str) -> set[str]:
    return {line for line in (FIXTURES / name).read_text().splitlines() if line and not line.startswith("#")}


def unknown_keys(config: dict, known: set[str]) -> list[str]:
    """Leaves of kit's config that are neither a key of the example config nor a subtree it replaces."""
    from pipeline_kit.training.nemo_rl import leaf_keys

    prefixes = {k.rsplit(".", i)[0] for k in known for i in range(1, k.count(".") + 1)}
    return [
        key
        for key in leaf_keys(config)
        if key != "defaults"
        and key not in known
        and key not in prefixes
        and not (key.startswith("data.") and key.rsplit(".", 1)[1] in DATASET_KWARGS)
    ]


@pytest.mark.parametrize(
    ("algorithm", "strategy", "fixture"),
    [
        ("sft", "fsdp", "keys_sft.txt"),
        ("sft", "megatron", "keys_sft.txt"),
        ("grpo", "fsdp", "keys_grpo.txt"),
        ("grpo", "megatron", "keys_grpo_megatron.txt"),
        ("dpo", "fsdp", "keys_dpo.txt"),
        ("dpo", "megatron", "keys_dpo.txt"),
    ],
)
def test_run_config_keys_are_nemo_rl_keys(algorithm, strategy, fixture):
    from pipeline_kit.training.config import parse_train_overrides
    from pipeline_kit.training.nemo_rl import EXAMPLE_CONFIGS, run_config

    assert re.search(r"^# commit: [0-9a-f]{40}\b", (FIXTURES / fixture).read_text(), re.M), (
        "the fixture names no commit"
    )
    cfg = parse_train_overrides([f"++algorithm={algorithm}", "++backend=nemo_rl", "++model=/m", "++training_data=/d",
                                 "++output_dir=/o", f"++strategy={strategy}", "++tensor_parallel_size=2",
                                 "++eval_steps=20", "++max_steps=50", "++micro_batch_size=8"])  # fmt: skip
    config = run_config(cfg, 8, 2, 3600, "/opt/nemo-rl", "run")
    assert config["defaults"] == f"/opt/nemo-rl/{EXAMPLE_CONFIGS[algorithm, strategy]}"
    assert unknown_keys(config, example_keys(fixture)) == []
    assert config["checkpointing"]["checkpoint_must_save_by"] == "00:01:00:00"
    assert config["policy"]["train_global_batch_size"] == 8 * 8  # micro 8 x (16 GPUs / tensor parallel 2)
    if algorithm == "grpo":
        assert config["grpo"]["num_prompts_per_step"] * config["grpo"]["num_generations_per_prompt"] == 64
    if algorithm == "dpo":  # DPO's beta is NeMo-RL's reference_policy_kl_penalty; pairs in its rank format
        assert config["dpo"]["reference_policy_kl_penalty"] == 0.1 and config["dpo"]["val_period"] == 20
        assert config["data"]["train"] == {
            "dataset_name": "PreferenceDataset",
            "data_path": "/o/nemo_rl/data/train.jsonl",
        }


def test_a_renamed_key_is_caught():
    """The check itself: a key NeMo-RL does not have is reported."""
    assert unknown_keys({"policy": {"optimizer": {"kwargs": {"learning_rate": 1}}}}, example_keys("keys_sft.txt")) == [
        "policy.optimizer.kwargs.learning_rate"
    ]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["++lora_rank=8"], "++lora_rank is not used by --backend=nemo_rl"),
        (["++reward.correct=2"], "++reward is not used by --backend=nemo_rl"),
        (["--backend=trl", "++strategy=megatron"], "++strategy is a NeMo-RL setting; add --backend=nemo_rl"),
        (["++pipeline_parallel_size=2"], "++pipeline_parallel_size=2 needs ++strategy=megatron"),
        (["dpo", "++loss_type=ipo"], "++loss_type is not used by --backend=nemo_rl"),
        (["dpo", "++ref_model=/r"], "++ref_model is not used by --backend=nemo_rl"),
        (["--cluster=slurm"], "--backend=nemo_rl runs in NeMo-RL's container: add --container=<key>"),
        (["++nemo_rl_dir=/nonexistent"], "++nemo_rl_dir=/nonexistent is no folder here"),
        (["--cluster=slurm", "--container=base", "--time_min=10"], "leaves NeMo-RL under a minute to train"),
    ],
)
def test_nemo_rl_bad_input_is_one_line(kit, configs, tmp_path, args, needle):
    d = configs("slurm", "executor: slurm\njob_dir: JOB_DIR\naccount: a\ncontainers:\n  base: img\n")
    command, *args = args if args[0] == "dpo" else ("sft", *args)
    data = tmp_path / "train.jsonl"
    data.write_text('{"problem": "1+1", "generation": "2", "chosen": "2", "rejected": "3"}\n')
    backend = [] if any(a.startswith("--backend") for a in args) else ["--backend=nemo_rl"]
    nemo_dir = [] if any(a.startswith("++nemo_rl_dir") for a in args) else [f"++nemo_rl_dir={tmp_path}"]
    res = kit(command, *backend, f"--config_dir={d}", "--model=/m", f"--training_data={data}", "--output_dir=/o",
              *nemo_dir, *args, "--dry_run")  # fmt: skip
    assert res.returncode == 2 and needle in res.stderr and res.stderr.count("\n") == 1, res.stderr


def fake_run(kit, tmp_path: Path, algorithm: str, stop_at: int | None, extra: list[str]):
    need("KIT_TEST_TINY_MODEL", "the tiny model")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "uv").write_text(f'#!/bin/sh\nexec "{BIN / "python"}" "{FAKE_UV}" "$@"\n')
    (bin_dir / "uv").chmod(0o755)
    env = {
        "PATH": f"{bin_dir}:{BIN}:{os.environ['PATH']}",
        "FAKE_UV_LOG": str(tmp_path / "uv.jsonl"),
        "FAKE_UV_MODEL": SERVICES["KIT_TEST_TINY_MODEL"],
        "KIT_NEMO_RL_PYTHON": str(BIN / "python"),
        **({"FAKE_UV_STOP_AT": str(stop_at)} if stop_at else {}),
    }
    nemo_dir = tmp_path / "nemo-rl"
    nemo_dir.mkdir(exist_ok=True)
    return kit(algorithm, "--expname=nrl", "--backend=nemo_rl", f"--model={SERVICES['KIT_TEST_TINY_MODEL']}",
               f"--training_data={tmp_path / 'train.jsonl'}", f"--output_dir={tmp_path / 'out'}",
               f"++nemo_rl_dir={nemo_dir}", "++save_steps=2", *extra, env=env)  # fmt: skip


def test_nemo_rl_job_runs_resumes_converts_and_averages(kit, tmp_path):
    """SFT with a stand-in NeMo-RL: the first job stops at step 4 (as checkpoint_must_save_by would), the second
    resumes and ends at step 6; the final model is the average of the newest two steps, converted to HF."""
    from safetensors.torch import load_file

    with (tmp_path / "train.jsonl").open("w") as f:
        for i in range(10):
            f.write(json.dumps({"problem": f"What is {i}+1?", "generation": f"\\boxed{{{i + 1}}}"}) + "\n")
    extra = ["++max_steps=6", "++average_last=2", "++eval_size=3"]
    res = fake_run(kit, tmp_path, "sft", 4, extra)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr
    out = tmp_path / "out"
    assert not (out / "final").exists() and "stopped at step 4 before the time limit" in res.stderr, res.stderr
    res = fake_run(kit, tmp_path, "sft", None, extra)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr
    assert f"resuming from {out}/nemo_rl/checkpoints/step_4 (step 4)" in res.stderr, res.stderr[-3000:]

    calls = [json.loads(line) for line in (tmp_path / "uv.jsonl").read_text().splitlines()]
    config = f"{out}/nemo_rl/config.yaml"
    nemo_dir = str(tmp_path / "nemo-rl")
    assert [c["argv"] for c in calls] == [
        ["run", "python", "examples/run_sft.py", "--config", config],
        ["run", "python", "examples/run_sft.py", "--config", config],
        *[["run", "python", "examples/converters/convert_dcp_to_hf.py", "--config",
           f"{out}/nemo_rl/checkpoints/step_{n}/config.yaml", "--dcp-ckpt-path",
           f"{out}/nemo_rl/checkpoints/step_{n}/policy/weights", "--hf-ckpt-path", f"{out}/nemo_rl/hf/.step_{n}.tmp"]
          for n in (4, 6)],
        ["run", "python", "-m", "pipeline_kit.training.averaging", f"{out}/final", f"{out}/nemo_rl/hf/step_4",
         f"{out}/nemo_rl/hf/step_6"],
    ]  # fmt: skip
    assert all(c["cwd"] == nemo_dir for c in calls)
    rows = [json.loads(line) for line in (out / "nemo_rl" / "data" / "train.jsonl").read_text().splitlines()]
    assert len(rows) == 10 and [m["role"] for m in rows[0]["messages"]] == ["user", "assistant"]
    assert "What is 0+1?" in rows[0]["messages"][0]["content"] and rows[0]["messages"][1]["content"] == "\\boxed{1}"
    assert len((out / "nemo_rl" / "data" / "validation.jsonl").read_text().splitlines()) == 3
    base = load_file(str(Path(SERVICES["KIT_TEST_TINY_MODEL"]) / "model.safetensors"))
    final = load_file(str(out / "final" / "model.safetensors"))
    name = next(k for k, v in base.items() if v.abs().sum() > 0)
    assert (final[name] - base[name] * 1.5).abs().max() < 1e-4 * base[name].abs().max() + 1e-6  # (1.4 + 1.6) / 2
    assert (out / "final" / "tokenizer.json").is_file()
    res = fake_run(kit, tmp_path, "sft", None, extra)
    assert res.returncode == 0 and "training is done" in res.stderr, res.stderr[-2000:]


def test_nemo_rl_grpo_job_writes_problems_and_answers(kit, tmp_path):
    with (tmp_path / "train.jsonl").open("w") as f:
        for i in range(4):
            f.write(json.dumps({"problem": f"What is {i}+1?", "expected_answer": i + 1}) + "\n")
    res = fake_run(kit, tmp_path, "grpo", None, ["++max_steps=2", "++micro_batch_size=8", "++num_generations=4"])
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr
    rows = [json.loads(line) for line in (tmp_path / "out/nemo_rl/data/train.jsonl").read_text().splitlines()]
    assert rows[0]["expected_answer"] == "1" and "What is 0+1?" in rows[0]["problem"] and "boxed" in rows[0]["problem"]
    calls = [json.loads(line)["argv"] for line in (tmp_path / "uv.jsonl").read_text().splitlines()]
    assert calls[0][:3] == ["run", "python", "examples/run_grpo.py"] and (tmp_path / "out/final/config.json").is_file()


def test_nemo_rl_dpo_job_writes_ranked_pairs_and_runs_run_dpo(kit, tmp_path):
    """magpie_math's pairs (a `prompt` of messages) and the common text layout, in one file: NeMo-RL's rank format,
    chosen at rank 0; the held-out pairs are its validation file, scored every ++eval_steps."""
    pairs = [
        {"prompt": [{"role": "user", "content": "What is 1+1?"}], "chosen": [{"role": "assistant", "content": "2"}],
         "rejected": [{"role": "assistant", "content": "3"}], "problem": "What is 1+1?"},
        {"prompt": "What is 2+2?", "chosen": "4", "rejected": "5"},
        {"problem": "What is 3+3?", "chosen": "6", "rejected": "7"},
    ]  # fmt: skip
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(p) + "\n" for p in pairs))
    (tmp_path / "held.jsonl").write_text(json.dumps(pairs[1]) + "\n")
    res = fake_run(kit, tmp_path, "dpo", None,
                   ["++max_steps=2", "++beta=0.2", "++eval_steps=1", f"++eval_data={tmp_path / 'held.jsonl'}"])  # fmt: skip
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr
    out = tmp_path / "out"
    rows = [json.loads(line) for line in (out / "nemo_rl/data/train.jsonl").read_text().splitlines()]
    assert rows[:2] == [
        {"context": [{"role": "user", "content": "What is 1+1?"}],
         "completions": [{"rank": 0, "completion": [{"role": "assistant", "content": "2"}]},
                         {"rank": 1, "completion": [{"role": "assistant", "content": "3"}]}]},
        {"context": [{"role": "user", "content": "What is 2+2?"}],
         "completions": [{"rank": 0, "completion": [{"role": "assistant", "content": "4"}]},
                         {"rank": 1, "completion": [{"role": "assistant", "content": "5"}]}]},
    ]  # fmt: skip
    assert "What is 3+3?" in rows[2]["context"][-1]["content"] and "boxed" in rows[2]["context"][-1]["content"]
    validation = [json.loads(line) for line in (out / "nemo_rl/data/validation.jsonl").read_text().splitlines()]
    assert validation == [rows[1]]
    import yaml

    config = yaml.safe_load((out / "nemo_rl" / "config.yaml").read_text())
    assert config["dpo"] == {"max_num_steps": 2, "max_num_epochs": 1, "seed": 42, "val_period": 1,
                             "reference_policy_kl_penalty": 0.2}  # fmt: skip
    assert config["data"]["validation"] == {"dataset_name": "PreferenceDataset",
                                            "data_path": f"{out}/nemo_rl/data/validation.jsonl"}  # fmt: skip
    calls = [json.loads(line)["argv"] for line in (tmp_path / "uv.jsonl").read_text().splitlines()]
    assert calls[0] == ["run", "python", "examples/run_dpo.py", "--config", f"{out}/nemo_rl/config.yaml"]
    assert (out / "final" / "config.json").is_file()
