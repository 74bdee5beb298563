"""The TRL trainer that `kit sft` / `kit grpo` / `kit dpo` run in the job: `python -m pipeline_kit.training.trl_train ++key=value`
(under torchrun for several GPUs or nodes). Resumes from the newest complete checkpoint; ends with <output_dir>/final.

Chat formatting uses the model's own chat template (the prompt config builds the user message from `problem`, as
`kit generate` does; DPO's pairs: training/pairs.py); SFT's loss covers the assistant's answer only. bf16 mixed precision on GPUs (fp32 master weights; final/ is saved in\nthe base model's dtype when that is bf16 or fp16), fp32 on CPU."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from pipeline_kit.errors import UserError
from pipeline_kit.inference.input_check import check_output_dir
from pipeline_kit.training.averaging import HALF, model_dtype
from pipeline_kit.training.checkpoints import (
    FINAL,
    SaveRequest,
    check_settings,
    make_callback,
    newest_step,
    publish_final,
    resume_point,
    run_settings,
    say,
    training_done,
)
from pipeline_kit.training.config import (
    TrainConfig,
    check_model_dirs,
    check_training_libraries,
    parse_train_overrides,
    read_training_records,
)
from pipeline_kit.training.pairs import pair_messages
from pipeline_kit.training.rewards import GraderReward, make_eval_callback


def conversations(cfg: TrainConfig, records: list[dict]) -> list[dict]:
    """TRL rows: `prompt` (chat messages from the prompt config), plus `completion` (SFT) or `expected_answer`
    (GRPO, handed to the reward); DPO's `prompt`, `chosen` and `rejected` messages."""
    from pipeline_kit.inference.prompts import load_prompt_config

    prompt = load_prompt_config(cfg.prompt_config)
    if cfg.algorithm == "dpo":
        return [pair_messages(record, prompt, line_no) for line_no, record in enumerate(records, 1)]
    rows = []
    for line_no, record in enumerate(records, 1):
        row = {"prompt": prompt.messages(record, line_no)}
        if cfg.algorithm == "sft":
            row["completion"] = [{"role": "assistant", "content": record["generation"]}]
        else:
            row["expected_answer"] = str(record["expected_answer"])
        rows.append(row)
    return rows


def final_dtype(cfg: TrainConfig) -> str | None:
    """A half-precision base model's dtype: the final model is saved in it (training keeps fp32 master weights
    under bf16/fp16 autocast, which would double the saved size); None keeps what the trainer has."""

    dtype = model_dtype(cfg.model)
    return dtype if dtype in HALF else None


def precision(cfg: TrainConfig) -> dict:
    import torch

    gpu = torch.cuda.is_available()
    dtype = cfg.dtype if cfg.dtype != "auto" else ("bf16" if gpu else "fp32")
    if dtype in ("bf16", "fp16") and not gpu:
        raise UserError(f"++dtype={cfg.dtype} needs a GPU; this job has none (use ++dtype=auto or fp32 on CPU).")
    return {"bf16": dtype == "bf16", "fp16": dtype == "fp16", "use_cpu": not gpu}


def trainer_args(cfg: TrainConfig) -> dict:
    """TrainingArguments common to SFT and GRPO."""
    os.environ.setdefault("TENSORBOARD_LOGGING_DIR", str(Path(cfg.output_dir) / "tensorboard"))
    if cfg.wandb_project:
        os.environ.setdefault("WANDB_PROJECT", cfg.wandb_project)
    return {
        "output_dir": cfg.output_dir,
        "max_steps": cfg.max_steps,
        "num_train_epochs": cfg.num_epochs,
        "learning_rate": cfg.learning_rate,
        "lr_scheduler_type": cfg.lr_scheduler,
        "warmup_steps": cfg.warmup_ratio,
        "weight_decay": cfg.weight_decay,
        "per_device_train_batch_size": cfg.micro_batch_size,
        "gradient_accumulation_steps": cfg.gradient_accumulation_steps,
        "seed": cfg.seed,
        "activation_checkpointing": cfg.activation_checkpointing,
        "save_strategy": "steps",
        "save_steps": cfg.save_steps,
        "save_total_limit": cfg.save_total_limit,
        "logging_steps": cfg.logging_steps,
        "logging_first_step": True,
        "report_to": [] if cfg.report_to == "none" else [cfg.report_to],
        "disable_tqdm": True,
        "dataloader_num_workers": 0,
        **precision(cfg),
    }


def peft_config(cfg: TrainConfig):
    if not cfg.lora_rank:
        return None
    from peft import LoraConfig

    targets = cfg.lora_target_modules
    return LoraConfig(
        r=cfg.lora_rank,
        lora_alpha=cfg.lora_alpha,
        lora_dropout=cfg.lora_dropout,
        target_modules=targets if targets == "all-linear" else [t.strip() for t in targets.split(",")],
        task_type="CAUSAL_LM",
    )


def build_trainer(cfg: TrainConfig, rows: list[dict], tokenizer, records: list[dict], fresh: bool):
    """The algorithm's TRL trainer (TRAINERS). `fresh`: no checkpoint to resume from."""
    from datasets import Dataset

    common = {"model": cfg.model, "train_dataset": Dataset.from_list(rows), "processing_class": tokenizer,
              "peft_config": peft_config(cfg)}  # fmt: skip
    return TRAINERS[cfg.algorithm](cfg, common, records, fresh)


def sft_trainer(cfg: TrainConfig, common: dict, records: list[dict], fresh: bool):
    from trl import SFTConfig, SFTTrainer

    args = SFTConfig(**trainer_args(cfg), max_length=cfg.max_length, completion_only_loss=True)
    return SFTTrainer(args=args, **common)


def dpo_trainer(cfg: TrainConfig, common: dict, records: list[dict], fresh: bool):
    """TRL's DPOTrainer against ++ref_model (default: a frozen copy of ++model). With ++eval_steps, the held-out
    pairs (++eval_data, else the first ++eval_size records) are scored every N steps, and before the first step of
    a fresh run: the log's eval_logps/chosen - eval_logps/rejected is the policy's margin on them."""
    from datasets import Dataset
    from trl import DPOConfig, DPOTrainer

    evaluation, held = {}, None
    if cfg.eval_steps:
        held_records = read_training_records(cfg.eval_data, "dpo", "++eval_data") if cfg.eval_data else records
        held = Dataset.from_list(conversations(cfg, held_records[: cfg.eval_size]))
        evaluation = {"eval_strategy": "steps", "eval_steps": cfg.eval_steps, "eval_on_start": fresh,
                      "per_device_eval_batch_size": cfg.micro_batch_size}  # fmt: skip
    ref = None
    if cfg.ref_model:
        import torch
        from transformers import AutoModelForCausalLM

        ref = AutoModelForCausalLM.from_pretrained(cfg.ref_model, dtype=torch.float32)  # as TRL loads the policy
    args = DPOConfig(**trainer_args(cfg), **evaluation, max_length=cfg.max_length, beta=cfg.beta,
                     loss_type=[cfg.loss_type])  # fmt: skip
    return DPOTrainer(args=args, ref_model=ref, eval_dataset=held, **common)


def grpo_trainer(cfg: TrainConfig, common: dict, records: list[dict], fresh: bool):
    from trl import GRPOConfig, GRPOTrainer

    vllm = {}
    if cfg.vllm_server:
        vllm = {"use_vllm": True, "vllm_mode": "server", "vllm_server_base_url": cfg.vllm_server}
    args = GRPOConfig(
        **trainer_args(cfg),
        num_generations=cfg.num_generations,
        max_completion_length=cfg.max_completion_length,
        temperature=cfg.temperature,
        top_p=cfg.top_p,
        beta=cfg.beta,
        **vllm,
    )
    return GRPOTrainer(reward_funcs=[GraderReward(cfg.reward)], args=args, **common)


TRAINERS = {"sft": sft_trainer, "grpo": grpo_trainer, "dpo": dpo_trainer}


def add_eval(cfg: TrainConfig, trainer, records: list[dict], tokenizer) -> None:
    """GRPO's graded greedy answers every ++eval_steps (DPO's evaluation is the trainer's own: dpo_trainer)."""
    if cfg.algorithm != "grpo" or not cfg.eval_steps:
        return

    held = read_training_records(cfg.eval_data, "grpo", "++eval_data") if cfg.eval_data else records
    held = held[: cfg.eval_size]
    prompts = [row["prompt"] for row in conversations(cfg, held)]
    trainer.add_callback(
        make_eval_callback(trainer, held, prompts, tokenizer, cfg.eval_steps, cfg.max_completion_length, cfg.reward)
    )


def run(cfg: TrainConfig) -> None:
    done = training_done(cfg.output_dir, cfg.max_steps)
    if done:
        say(done)
        return
    if (Path(cfg.output_dir) / FINAL / "config.json").is_file():
        say(f"training on from step {newest_step(cfg.output_dir)} to ++max_steps={cfg.max_steps}")
    check_model_dirs(cfg)
    check_output_dir(cfg.output_dir, flag="++output_dir")  # as at submission, where kit sees it (precheck.py)
    records = read_training_records(cfg.training_data, cfg.algorithm)
    rows = conversations(cfg, records)  # every record's prompt is built (and checked) before torch loads
    Path(cfg.output_dir).mkdir(parents=True, exist_ok=True)
    rank0 = int(os.environ.get("RANK", "0")) == 0
    if rank0:
        check_settings(cfg.output_dir, run_settings(cfg))
    request = SaveRequest()
    request.install()
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")  # a job's log is no terminal
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_warning()
    hf_logging.disable_progress_bar()
    tokenizer = AutoTokenizer.from_pretrained(cfg.model)
    if tokenizer.chat_template is None:
        raise UserError(f"++model={cfg.model} has no chat template; training formats chats with the model's own.")
    start = resume_point(cfg.output_dir)
    trainer = build_trainer(cfg, rows, tokenizer, records, fresh=start is None)
    trainer.add_callback(make_callback(request))
    add_eval(cfg, trainer, records, tokenizer)
    say(
        f"{cfg.algorithm} on {len(rows)} records from {cfg.training_data}; "
        + (f"resuming from {start} (step {start.name.split('-')[1]})" if start else "starting at step 0")
    )
    t0 = time.time()
    result = trainer.train(resume_from_checkpoint=str(start) if start else None)
    if request.stop:
        say(f"stopped at step {trainer.state.global_step} on {request.reason}; a new job resumes from its checkpoint")
        sys.exit(143)
    say(
        f"trained to step {trainer.state.global_step} in {time.time() - t0:.2f}s (train loss {result.training_loss:.4f})"
    )
    final = publish_final(
        trainer, tokenizer, cfg.output_dir, bool(cfg.lora_rank), cfg.average_last, dtype=final_dtype(cfg)
    )
    print(f"kit train: saved {final}")


def main(argv: list[str] | None = None) -> int:
    try:
        check_training_libraries()  # before the overrides: parsing them needs hydra
        # torchrun's WORLD_SIZE: the data-parallel processes GRPO's batch is counted over
        processes = int(os.environ.get("WORLD_SIZE", "1"))
        cfg = parse_train_overrides(list(sys.argv[1:] if argv is None else argv), processes=processes)
        run(cfg)
    except UserError as e:
        print(f"kit train: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
