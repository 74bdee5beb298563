"""The baseline of perf/bench_training.py: a plain TRL script, as a researcher would write it, with no kit code.

  python perf/bare_trl.py sft|grpo MODEL ROWS.jsonl OUTPUT_DIR KEY=VALUE...

ROWS.jsonl holds TRL's conversational rows (`prompt` + `completion` for SFT, `prompt` + `expected_answer` for GRPO).
KEY=VALUE: max_steps, logging_steps (0: max_steps), micro_batch_size, learning_rate, max_length, num_generations,
max_completion_length, seed.
Prints `trained to step N in X s` (the time of trainer.train()), as kit's trainer does.
"""

from __future__ import annotations

import json
import re
import sys
import time


def boxed_reward(completions, expected_answer, **_):
    """+1 for the right \\boxed{} answer, -0.5 for a wrong one, +0.1 for any boxed answer (kit's defaults)."""
    scores = []
    for completion, expected in zip(completions, expected_answer, strict=True):
        found = re.findall(r"\\boxed\{([^{}]*)\}", completion[-1]["content"])
        score = (1.0 if found[-1].strip() == expected else -0.5) + 0.1 if found else -0.5
        scores.append(score)
    return scores


def main() -> None:
    algorithm, model, rows_path, output_dir, *pairs = sys.argv[1:]
    opts = {"max_steps": 100, "logging_steps": 0, "micro_batch_size": 8, "learning_rate": 1e-5, "max_length": 256,
            "num_generations": 8, "max_completion_length": 64, "seed": 42}  # fmt: skip
    for pair in pairs:
        key, value = pair.split("=", 1)
        opts[key] = type(opts[key])(value)

    import torch
    from datasets import Dataset

    gpu = torch.cuda.is_available()
    with open(rows_path) as f:
        data = Dataset.from_list([json.loads(line) for line in f])
    common = {
        "output_dir": output_dir,
        "max_steps": opts["max_steps"],
        "per_device_train_batch_size": opts["micro_batch_size"],
        "learning_rate": opts["learning_rate"],
        "seed": opts["seed"],
        "save_steps": opts["max_steps"],
        "logging_steps": opts["logging_steps"] or opts["max_steps"],
        "lr_scheduler_type": "cosine",
        "logging_first_step": True,
        "report_to": ["tensorboard"],
        "disable_tqdm": True,
        "use_cpu": not gpu,
        # kit's settings, set here because TRL's own differ: bf16 on a GPU and fp32 on CPU (TRL: bf16 unless fp16),
        # no activation checkpointing (TRL: gradient_checkpointing=True); left to TRL, this script runs ~10% slower
        "bf16": gpu,
        "activation_checkpointing": False,
    }
    if algorithm == "sft":
        from trl import SFTConfig, SFTTrainer

        args = SFTConfig(**common, max_length=opts["max_length"], completion_only_loss=True)
        trainer = SFTTrainer(model=model, args=args, train_dataset=data)
    else:
        from trl import GRPOConfig, GRPOTrainer

        args = GRPOConfig(**common, num_generations=opts["num_generations"],
                          max_completion_length=opts["max_completion_length"])  # fmt: skip
        trainer = GRPOTrainer(model=model, reward_funcs=[boxed_reward], args=args, train_dataset=data)
    t0 = time.time()
    trainer.train()
    print(f"trained to step {trainer.state.global_step} in {time.time() - t0:.2f}s", flush=True)
    trainer.save_model(f"{output_dir}/final")


if __name__ == "__main__":
    main()
