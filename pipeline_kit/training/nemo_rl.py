"""The NeMo-RL backend (`kit sft/grpo/dpo --backend=nemo_rl`) as the submission side sees it: the trainer's command
(pipeline_kit.training.nemo_rl_job in NeMo-RL's container, fed the run config kit renders here, so a dry run shows
it whole), the run config (kit's settings over NeMo-RL's own example config, through its `defaults:` key), and the
launch and checkpoint-converter command lines the job runs. On Slurm NeMo-RL saves by its own clock
(`checkpoint_must_save_by`: the time limit less --save_before_timeout); --dependent_jobs resume from step_N.

Read from NVIDIA-NeMo/RL at b26cfeb3, DPO at 00455ac0 (tests/fixtures/nemo_rl names the commits and holds the
config keys they had);
nothing here imports NeMo-RL: the job runs it inside its container, where `uv run` resolves its environment."""

from __future__ import annotations

import math
import os
import shlex
from pathlib import PurePosixPath

from pipeline_kit.errors import UserError
from pipeline_kit.training.backends import TrainerLaunch, TrainingBackend
from pipeline_kit.training.config import TRL_ONLY, RewardConfig, TrainConfig, changed_keys

SCRIPTS = {"sft": "examples/run_sft.py", "grpo": "examples/run_grpo.py", "dpo": "examples/run_dpo.py"}
EXAMPLE_CONFIGS = {
    ("sft", "fsdp"): "examples/configs/sft.yaml",
    ("sft", "megatron"): "examples/configs/sft.yaml",
    ("dpo", "fsdp"): "examples/configs/dpo.yaml",
    ("dpo", "megatron"): "examples/configs/dpo.yaml",
    ("grpo", "fsdp"): "examples/configs/grpo_math_1B.yaml",
    ("grpo", "megatron"): "examples/configs/grpo_math_1B_megatron.yaml",
}
# NeMo-RL's dataset class of the train and validation files kit writes (nemo_rl_job.training_rows): SFT's chats,
# DPO's pairs in its rank format
DATASET_CLASSES = {"sft": "openai_format", "dpo": "PreferenceDataset"}
RUN_STEPS = 1_000_000_000  # max_num_steps when kit trains by epochs (NeMo-RL stops at whichever limit comes first)
PYTHON_VAR = "KIT_NEMO_RL_PYTHON"  # the container's Python that runs kit's side (NeMo-RL's own runs under `uv run`)
HEREDOC = "KIT_NEMO_RL_CONFIG"


class NemoRlBackend(TrainingBackend):
    name = "nemo_rl"
    title = "NeMo-RL"
    save_before_timeout = 900  # its start-up counts too
    saves_on_signal = False  # checkpoint_must_save_by
    needs_container = True
    container_example = "nemo_rl: nvcr.io/nvidia/nemo-rl:v0.4.0"

    def check_config(self, cfg: TrainConfig) -> None:
        if cfg.strategy not in ("fsdp", "megatron"):
            raise UserError(f"++strategy={cfg.strategy} is not one of fsdp, megatron.")
        if cfg.pipeline_parallel_size != 1 and cfg.strategy != "megatron":
            raise UserError(f"++pipeline_parallel_size={cfg.pipeline_parallel_size} needs ++strategy=megatron.")
        trl_only = changed_keys(cfg, TRL_ONLY)
        trl_only += ["reward"] if cfg.reward != RewardConfig() else []
        trl_only += changed_keys(cfg, ("loss_type", "ref_model"))  # NeMo-RL's DPO: the sigmoid loss, the initial policy
        trl_only += ["eval_data"] if cfg.algorithm == "grpo" and cfg.eval_data else []  # NeMo-RL holds out 5% itself
        if trl_only:
            raise UserError(
                f"++{trl_only[0]} is not used by --backend=nemo_rl (its GRPO reward is NeMo-RL's math environment; "
                "its DPO has the sigmoid loss against the initial policy); drop it, or use --backend=trl."
            )

    def data_parallel(self, cfg: TrainConfig, num_gpus: int, num_nodes: int) -> int:
        return data_parallel(cfg, num_gpus, num_nodes)

    def check_here(self, cfg: TrainConfig, env: dict[str, str]) -> None:

        if not os.path.isdir(cfg.nemo_rl_dir):
            raise UserError(
                f"++nemo_rl_dir={cfg.nemo_rl_dir} is no folder here; point it at a NeMo-RL checkout, or run in its "
                "container."
            )

    def command(self, launch: TrainerLaunch) -> str:
        """kit's job module reads the run config from a heredoc, so that the job script holds it."""
        import yaml

        cfg = launch.cfg
        config = run_config(cfg, launch.num_gpus, launch.num_nodes, launch.save_by_s, cfg.nemo_rl_dir, launch.run_name)
        text = yaml.safe_dump(config, sort_keys=False, default_flow_style=False)
        head = f'KIT_RAY_HEAD="{launch.head_host}" ' if launch.num_nodes > 1 else ""
        args = " ".join(shlex.quote(a) for a in launch.overrides)
        line = f'{head}"${{{PYTHON_VAR}:-python3}}" -m pipeline_kit.training.nemo_rl_job {args}'
        return f"{line} <<'{HEREDOC}'\n# kit's run config for NeMo-RL (merged over `defaults`)\n{text}{HEREDOC}"


def layout(output_dir: str) -> dict[str, str]:
    """Where the job keeps NeMo-RL's files under --output_dir (the final model is <output_dir>/final)."""
    base = PurePosixPath(output_dir) / "nemo_rl"
    return {
        "config": str(base / "config.yaml"),
        "data": str(base / "data"),
        "checkpoints": str(base / "checkpoints"),
        "hf": str(base / "hf"),
        "logs": str(base / "logs"),
    }


def _uv(strategy: str) -> list[str]:
    return ["uv", "run", *(["--extra", "mcore"] if strategy == "megatron" else []), "python"]


def launch_argv(cfg: TrainConfig) -> list[str]:
    """The training command, run in NeMo-RL's folder."""
    return [*_uv(cfg.strategy), SCRIPTS[cfg.algorithm], "--config", layout(cfg.output_dir)["config"]]


def convert_argv(cfg: TrainConfig, step_dir: str, hf_dir: str, weights: str) -> list[str]:
    """NeMo-RL's converter from a step_N checkpoint to Hugging Face format (`weights`: its weights folder)."""
    if cfg.strategy == "megatron":
        script, flag = "examples/converters/convert_megatron_to_hf.py", "--megatron-ckpt-path"
    else:
        script, flag = "examples/converters/convert_dcp_to_hf.py", "--dcp-ckpt-path"
    return [*_uv(cfg.strategy), script, "--config", f"{step_dir}/config.yaml", flag, weights, "--hf-ckpt-path", hf_dir]


def data_parallel(cfg: TrainConfig, num_gpus: int, num_nodes: int) -> int:
    """Data-parallel ranks: the GPUs over the model-parallel size."""
    model_parallel = cfg.tensor_parallel_size * cfg.pipeline_parallel_size
    return max(max(num_gpus, 1) * num_nodes // model_parallel, 1)


def global_batch(cfg: TrainConfig, num_gpus: int, num_nodes: int) -> int:
    """kit's batch: micro × accumulation × data-parallel ranks."""
    return cfg.micro_batch_size * cfg.gradient_accumulation_steps * data_parallel(cfg, num_gpus, num_nodes)


def run_config(
    cfg: TrainConfig, num_gpus: int, num_nodes: int, save_by_s: int | None, nemo_rl_dir: str, run_name: str
) -> dict:
    """The run config: `defaults` names NeMo-RL's example config, every other key is one kit sets.
    `save_by_s`: seconds of training after which NeMo-RL saves and stops (Slurm's limit less the margin)."""
    paths = layout(cfg.output_dir)
    steps = cfg.max_steps if cfg.max_steps > 0 else RUN_STEPS
    batch = global_batch(cfg, num_gpus, num_nodes)
    policy: dict = {
        "model_name": cfg.model,
        "tokenizer": {"name": cfg.model},
        "train_global_batch_size": batch,
        "train_micro_batch_size": cfg.micro_batch_size,
        "max_total_sequence_length": cfg.max_length,
        "precision": "bfloat16",
    }
    if cfg.strategy == "megatron":
        policy["dtensor_cfg"] = {"enabled": False}
        policy["megatron_cfg"] = {
            "enabled": True,
            "tensor_model_parallel_size": cfg.tensor_parallel_size,
            "pipeline_model_parallel_size": cfg.pipeline_parallel_size,
            "activation_checkpointing": cfg.activation_checkpointing,
            "optimizer": {"lr": cfg.learning_rate, "weight_decay": cfg.weight_decay},
        }
        policy["make_sequence_length_divisible_by"] = cfg.tensor_parallel_size
        policy["optimizer"] = None  # Megatron's optimizer is megatron_cfg.optimizer
    else:
        policy["dtensor_cfg"] = {
            "enabled": True,
            "tensor_parallel_size": cfg.tensor_parallel_size,
            "activation_checkpointing": cfg.activation_checkpointing,
        }
        policy["megatron_cfg"] = {"enabled": False}
        policy["optimizer"] = {"kwargs": {"lr": cfg.learning_rate, "weight_decay": cfg.weight_decay}}
    algo: dict = {"max_num_steps": steps, "max_num_epochs": math.ceil(cfg.num_epochs), "seed": cfg.seed}
    if cfg.eval_steps:
        algo["val_period"] = cfg.eval_steps
    if cfg.algorithm in DATASET_CLASSES:  # SFT's chats, DPO's ranked pairs (nemo_rl_job.py writes both splits)
        data = {
            split: {"dataset_name": DATASET_CLASSES[cfg.algorithm], "data_path": f"{paths['data']}/{split}.jsonl"}
            for split in ("train", "validation")
        }
        if cfg.algorithm == "dpo":
            algo["reference_policy_kl_penalty"] = cfg.beta
    else:
        algo["num_generations_per_prompt"] = cfg.num_generations
        algo["num_prompts_per_step"] = batch // cfg.num_generations
        policy["generation"] = {
            "max_new_tokens": cfg.max_completion_length,
            "temperature": cfg.temperature,
            "top_p": cfg.top_p,
            "vllm_cfg": {"tensor_parallel_size": cfg.tensor_parallel_size, "max_model_len": cfg.max_length},
        }
        data = {  # the problem is already the user message of kit's prompt config: no NeMo-RL prompt file
            "default": {"prompt_file": None},
            "train": {
                "dataset_name": "ResponseDataset",
                "data_path": f"{paths['data']}/train.jsonl",
                "input_key": "problem",
                "output_key": "expected_answer",
            },  # fmt: skip
        }
    config = {
        "defaults": f"{nemo_rl_dir}/{EXAMPLE_CONFIGS[cfg.algorithm, cfg.strategy]}",
        cfg.algorithm: algo,
        "policy": policy,
        "data": data,
        "checkpointing": {
            "enabled": True,
            "checkpoint_dir": paths["checkpoints"],
            "save_period": cfg.save_steps,
            "keep_top_k": cfg.save_total_limit,
            "metric_name": None,  # keep the newest checkpoints (resume, averaging), not the best by a metric
            "checkpoint_must_save_by": _dhms(save_by_s) if save_by_s else None,
        },
        "logger": {
            "log_dir": paths["logs"],
            "tensorboard_enabled": cfg.report_to == "tensorboard",
            "wandb_enabled": cfg.report_to == "wandb",
            "wandb": {"project": cfg.wandb_project or "kit", "name": run_name},
        },
        "cluster": {"gpus_per_node": max(num_gpus, 1), "num_nodes": num_nodes},
    }
    if cfg.algorithm == "grpo":
        config["loss_fn"] = {"reference_policy_kl_penalty": cfg.beta}
    if cfg.algorithm in DATASET_CLASSES and cfg.report_to == "tensorboard":
        config["logger"]["tensorboard"] = {"log_dir": f"{cfg.output_dir}/tensorboard"}
    return config


def leaf_keys(config: dict, prefix: str = "") -> list[str]:
    """Dotted paths of a config's leaves (a value that is not a non-empty mapping)."""
    out = []
    for key, value in config.items():
        path = f"{prefix}{key}"
        out += leaf_keys(value, f"{path}.") if isinstance(value, dict) and value else [path]
    return out


def _dhms(seconds: int) -> str:
    """NeMo-RL's checkpoint_must_save_by format, DD:HH:MM:SS."""
    days, rest = divmod(max(seconds, 60), 86400)
    hours, rest = divmod(rest, 3600)
    return f"{days:02d}:{hours:02d}:{rest // 60:02d}:{rest % 60:02d}"
