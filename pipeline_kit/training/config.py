"""Typed config of the TRL training script (`python -m pipeline_kit.training.trl_train ++key=value ...`), filled
from `++key=value` overrides with the generation script's parser; the checks that need no torch live here too."""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from importlib.util import find_spec
from pathlib import Path

from pipeline_kit.errors import UserError, did_you_mean
from pipeline_kit.grading.modes import DEFAULT_EXTRACT, check_mode
from pipeline_kit.jsonl import numbered_records
from pipeline_kit.overrides import MISSING, check_overrides, parse_overrides
from pipeline_kit.training.backends import load_backend
from pipeline_kit.training.pairs import MADE_BY, NEEDS, check_pair

ALGORITHMS = ("sft", "grpo", "dpo")
# the fields SFT and GRPO need in every training record (kit prepare_sft_data / prepare_rl_data write them); DPO's
# pairs are checked by training/pairs.py
REQUIRED_FIELDS = {"sft": ("problem", "generation"), "grpo": ("problem", "expected_answer")}
REPORTERS = ("tensorboard", "wandb", "none")
DEFAULT_BETA = {"sft": 0.0, "grpo": 0.0, "dpo": 0.1}  # ++beta when not given
# TRL's DPO losses (DPOConfig.loss_type of the trl this kit is tested with)
LOSS_TYPES = ("sigmoid", "hinge", "ipo", "exo_pair", "nca_pair", "robust", "bco_pair", "sppo_hard", "aot",
              "aot_unpaired", "apo_zero", "apo_down", "discopop", "sft", "sigmoid_norm")  # fmt: skip


@dataclass
class RewardConfig:
    """GRPO's reward from kit's math grader: `correct` or `incorrect`, plus `boxed` when the answer is boxed. The
    answer is extracted as `kit eval` extracts it by default (`extract_mode`), so the rule that rewarded a model is
    the rule that scores it."""

    correct: float = 1.0
    incorrect: float = -0.5
    boxed: float = 0.1
    workers: int | None = None  # grader processes (default: the CPUs this job may use, at most 8)
    timeout: float = 10.0  # seconds per answer
    extract_mode: str = DEFAULT_EXTRACT  # kit grade --extract: boxed (kit eval's default) | auto | ...
    # a reasoning model's completion is graded on what follows its last end_reasoning_string, as `kit eval
    # ++parse_reasoning=True` grades it; a trace that never reached it has no answer (`incorrect`, no `boxed`)
    parse_reasoning: bool = False
    end_reasoning_string: str = "</think>"


@dataclass
class TrainConfig:
    algorithm: str = MISSING  # sft | grpo | dpo
    backend: str = "trl"  # a name in training/__init__.py's BACKENDS, or module:Class (kit sft --backend sets it)
    model: str = MISSING  # a Hugging Face model folder (or a checkpoint's final/)
    training_data: str = MISSING  # JSONL: problem + generation (sft), problem + expected_answer (grpo), pairs (dpo)
    output_dir: str = MISSING  # checkpoint-N/, final/, tensorboard/
    prompt_config: str = "generic/math"  # the user message built from `problem`, as `kit generate` builds it
    # schedule
    max_steps: int = -1  # -1: num_epochs over the data
    num_epochs: float = 1.0
    learning_rate: float = 1e-5
    lr_scheduler: str = "cosine"
    warmup_ratio: float = 0.0
    weight_decay: float = 0.0
    micro_batch_size: int = 1  # per device (GRPO: completions per device)
    gradient_accumulation_steps: int = 1
    max_length: int = 4096  # tokens of prompt + answer (SFT, DPO)
    seed: int = 42
    dtype: str = "auto"  # auto (bf16 on GPU, fp32 on CPU) | bf16 | fp16 | fp32
    activation_checkpointing: bool = False  # recompute activations in the backward pass (less memory)
    # checkpoints and logs
    save_steps: int = 100  # a checkpoint every N steps (and one when Slurm's early-warning signal arrives)
    save_total_limit: int | None = 3
    logging_steps: int = 10
    report_to: str = "tensorboard"  # tensorboard | wandb | none
    wandb_project: str | None = None
    average_last: int = 1  # the final model is the average of the newest N checkpoints' weights (1: the last one)
    # NeMo-RL only: fsdp (DTensor) | megatron, and model parallelism
    strategy: str = "fsdp"
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1  # megatron
    nemo_rl_dir: str = "/opt/nemo-rl"  # NeMo-RL's repository in its container
    # LoRA through peft (0: full fine-tuning); the final model is merged back into plain weights
    lora_rank: int = 0
    lora_alpha: int = 16
    lora_dropout: float = 0.05
    lora_target_modules: str = "all-linear"
    # GRPO
    num_generations: int = 8  # completions per prompt
    max_completion_length: int = 1024
    temperature: float = 1.0
    top_p: float = 1.0
    # how far the policy may move from the reference model: GRPO's KL coefficient (0: no reference model), DPO's
    # beta [default: 0 for GRPO, 0.1 for DPO]
    beta: float | None = None
    vllm_server: str | None = None  # http://host:port of `trl vllm-serve` (kit grpo --vllm_server_gpus sets it)
    # every N steps (0: off), GRPO grades greedy answers to eval_data, DPO scores eval_data's held-out pairs
    eval_steps: int = 0
    eval_data: str | None = None  # JSONL as the training data [default: the first eval_size of the data]
    eval_size: int = 64
    reward: RewardConfig = field(default_factory=RewardConfig)
    # DPO
    loss_type: str = "sigmoid"  # TRL's DPO loss (LOSS_TYPES); NeMo-RL has sigmoid only
    ref_model: str | None = None  # the frozen reference model's folder [default: ++model]


def parse_train_overrides(args: list[str], complete: bool = True, processes: int | None = None) -> TrainConfig | None:
    """`processes`: the trainer's data-parallel processes, where known (GRPO's batch is checked against them)."""
    cfg = parse_overrides(args, TrainConfig, "training", complete=complete)
    if cfg is not None:
        check_config(cfg, processes)
        if cfg.beta is None:
            cfg.beta = DEFAULT_BETA[cfg.algorithm]
    return cfg


def check_train_overrides(args: list[str] | tuple[str, ...]) -> None:
    """The check at submission (no hydra in the common case): every key exists and each value fits its type."""
    check_overrides(args, TrainConfig, "training")


def check_config(cfg: TrainConfig, processes: int | None = None) -> None:
    """The rules between values; each is one UserError naming the key. GRPO's batch against ++num_generations is
    checked where the data-parallel `processes` are known (see check_grpo_batch)."""
    if cfg.algorithm not in ALGORITHMS:
        raise UserError(f"++algorithm={cfg.algorithm} is not one of {', '.join(ALGORITHMS)}.")
    if cfg.report_to not in REPORTERS:
        raise UserError(f"++report_to={cfg.report_to} is not one of {', '.join(REPORTERS)}.")
    if cfg.dtype not in ("auto", "bf16", "fp16", "fp32"):
        raise UserError(f"++dtype={cfg.dtype} is not one of auto, bf16, fp16, fp32.")
    for key in ("micro_batch_size", "gradient_accumulation_steps", "save_steps", "logging_steps", "max_length"):
        if getattr(cfg, key) < 1:
            raise UserError(f"++{key}={getattr(cfg, key)} must be at least 1.")
    if cfg.max_steps == 0 or cfg.max_steps < -1:
        raise UserError(f"++max_steps={cfg.max_steps}: give a positive step count, or -1 to train ++num_epochs.")
    if cfg.average_last < 1 or cfg.average_last > (cfg.save_total_limit or cfg.average_last):
        raise UserError(
            f"++average_last={cfg.average_last}: give 1 (the last checkpoint) up to ++save_total_limit="
            f"{cfg.save_total_limit} (the checkpoints kept)."
        )
    if cfg.average_last > 1 and cfg.lora_rank:
        raise UserError(
            f"++average_last={cfg.average_last} averages full checkpoints; LoRA (++lora_rank) saves adapters."
        )
    _check_backend(cfg)
    check_mode(cfg.reward.extract_mode, "++reward.extract_mode")
    if cfg.lora_rank < 0:
        raise UserError(f"++lora_rank={cfg.lora_rank} must be 0 (full fine-tuning) or more.")
    _check_algorithm_keys(cfg)
    if cfg.algorithm == "sft":
        grpo_only = []
        if cfg.backend == "trl":  # NeMo-RL's SFT validates on eval_data every eval_steps
            grpo_only += ["eval_data"] if cfg.eval_data is not None else []
            grpo_only += ["eval_steps"] if cfg.eval_steps else []
        if grpo_only:
            raise UserError(f"++{grpo_only[0]} is a GRPO or DPO setting; drop it for kit sft.")
    elif cfg.algorithm == "dpo":
        if cfg.loss_type not in LOSS_TYPES:
            raise UserError(
                f"++loss_type={cfg.loss_type} is not one of TRL's DPO losses.{did_you_mean(cfg.loss_type, LOSS_TYPES)} "
                f"Known: {', '.join(LOSS_TYPES)}."
            )
        if cfg.beta is not None and cfg.beta <= 0:
            raise UserError(f"++beta={cfg.beta}: DPO's beta must be above 0 (0.1 is usual).")
    else:
        if cfg.num_generations < 2:
            raise UserError(f"++num_generations={cfg.num_generations}: GRPO compares at least 2 completions a prompt.")
        if processes is not None:
            check_grpo_batch(cfg, processes)


def accumulation_for_generations(cfg: TrainConfig, processes: int) -> int:
    """The fewest ++gradient_accumulation_steps that make a GRPO step (++micro_batch_size × steps × the
    data-parallel `processes`) hold whole groups of ++num_generations completions: what kit uses when neither batch
    key is given, so that the defaults hold on any GPU count."""
    return cfg.num_generations // math.gcd(cfg.num_generations, cfg.micro_batch_size * processes)


def check_grpo_batch(cfg: TrainConfig, processes: int) -> None:
    """A GRPO step's completions (micro batch × accumulation × data-parallel processes, as TRL and NeMo-RL count
    them) must be whole groups of ++num_generations."""
    batch = cfg.micro_batch_size * cfg.gradient_accumulation_steps * processes
    if batch % cfg.num_generations:
        steps = accumulation_for_generations(cfg, processes)
        raise UserError(
            f"++micro_batch_size={cfg.micro_batch_size} × ++gradient_accumulation_steps="
            f"{cfg.gradient_accumulation_steps} × {processes} data-parallel process(es) = {batch} completions a step "
            f"is not a multiple of ++num_generations={cfg.num_generations}; make it one (e.g. "
            f"++gradient_accumulation_steps={steps}, or leave both batch keys out and kit picks that)."
        )


# keys of one algorithm: another one refuses them when they differ from their defaults
GRPO_ONLY = ("num_generations", "max_completion_length", "temperature", "top_p", "vllm_server", "reward")
DPO_ONLY = ("loss_type", "ref_model")
FOREIGN_KEYS = {"sft": (*GRPO_ONLY, *DPO_ONLY, "beta"), "grpo": DPO_ONLY, "dpo": GRPO_ONLY}


def _check_algorithm_keys(cfg: TrainConfig) -> None:
    """A key of another algorithm, changed from its default, is a mistake (one line naming it)."""
    changed = changed_keys(cfg, FOREIGN_KEYS[cfg.algorithm])
    if changed:
        owner = "DPO" if changed[0] in DPO_ONLY else "GRPO" if changed[0] in GRPO_ONLY else "GRPO or DPO"
        raise UserError(f"++{changed[0]} is a {owner} setting; drop it for kit {cfg.algorithm}.")


NEMO_RL_ONLY = ("strategy", "tensor_parallel_size", "pipeline_parallel_size", "nemo_rl_dir")
TRL_ONLY = ("lora_rank", "vllm_server", "lr_scheduler", "dtype")  # NeMo-RL: bf16, its schedule


def changed_keys(cfg: TrainConfig, keys) -> list[str]:
    """The keys whose values differ from TrainConfig's defaults."""
    defaults = TrainConfig(algorithm=cfg.algorithm, model="", training_data="", output_dir="")
    return [k for k in keys if getattr(cfg, k) != getattr(defaults, k)]


def _check_backend(cfg: TrainConfig) -> None:
    """The settings the backend (training/__init__.py's BACKENDS, or a user's module:Class) cannot honour."""

    load_backend(cfg.backend).check_config(cfg)


TRAINING_LIBRARIES = ("torch", "transformers", "trl", "datasets", "accelerate", "hydra")  # hydra: parses ++key=value


def check_training_libraries(python: str = sys.executable) -> None:
    """The trainer's Python has the `train` extra (a clear line instead of an import traceback in the job)."""

    missing = [name for name in TRAINING_LIBRARIES if find_spec(name) is None]
    if missing:
        raise UserError(
            f"{python} has no {', '.join(missing)}: install the training extra there (pip install "
            f"'pipeline_kit[train]'), or point KIT_TRAIN_PYTHON at a Python that has it."
        )


def check_model_dir(path: str, flag: str = "++model") -> None:
    """A Hugging Face model folder: it exists and has a config.json."""
    folder = Path(path)
    if not folder.is_dir():
        raise UserError(f"{flag}={path}: no such folder; give a Hugging Face model folder (with config.json).")
    if not (folder / "config.json").is_file():
        raise UserError(f"{flag}={path} has no config.json; give a Hugging Face model folder, e.g. <output_dir>/final.")


def check_model_dirs(cfg: TrainConfig) -> None:
    """The model and, for DPO, its reference model (as the job sees them)."""
    check_model_dir(cfg.model)
    if cfg.ref_model:
        check_model_dir(cfg.ref_model, "++ref_model")


def read_training_records(path: str, algorithm: str, flag: str = "++training_data") -> list[dict]:
    """Every record of the training JSONL, each checked for what `algorithm` needs (one error naming the line)."""

    file = Path(path)
    if not file.is_file():
        raise UserError(f"{flag}={path}: no such file; {MAKE_DATA[algorithm]}.")
    records = []
    with file.open(encoding="utf-8") as f:
        for line_no, record in numbered_records(f, path):
            where = f"{path}:{line_no}"
            if algorithm == "dpo":
                check_pair(record, where)
            else:
                _check_fields(record, where, algorithm)
            records.append(record)
    if not records:
        need = NEEDS if algorithm == "dpo" else " and ".join(REQUIRED_FIELDS[algorithm])
        raise UserError(f"{flag}={path} has no records; it needs {need} on every line.")
    return records


# how to make each algorithm's training data, for the message when it is missing
MAKE_DATA = {"sft": "make one with kit prepare_sft_data", "grpo": "make one with kit prepare_rl_data", "dpo": MADE_BY}


def _check_fields(record: dict, where: str, algorithm: str) -> None:
    need = REQUIRED_FIELDS[algorithm]
    for key in need:
        value = record.get(key)
        if value is None or (key != "expected_answer" and not isinstance(value, str)):
            raise UserError(
                f"{where}: the record has no {key!r} string; {algorithm} training needs {' and '.join(need)} on every "
                f"line ({MAKE_DATA[algorithm].removeprefix('make one with ')} writes them)."
            )
