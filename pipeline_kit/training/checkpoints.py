"""Checkpoints that survive wall-time limits: which checkpoint-N folders are complete (a marker written after the
trainer saved), Slurm's early-warning signal turned into a save, and the settings a resume must not change."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sys
import time
from dataclasses import asdict
from pathlib import Path

from pipeline_kit.atomic import write_atomic
from pipeline_kit.errors import UserError
from pipeline_kit.training.averaging import average_checkpoints, cast_weights
from pipeline_kit.training.config import FOREIGN_KEYS

COMPLETE = "kit-complete"  # written into checkpoint-N once the trainer finished saving it
SETTINGS = "kit-train.json"  # the settings of the run that wrote <output_dir>; a resume must keep them
FINAL = "final"
# asked of Slurm by the job (`--signal=USR1@N`); also TERM, which Slurm sends at the limit and `kit cancel` sends
SAVE_SIGNAL = signal.SIGUSR1
_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")
# settings that change how a run reports or saves, not what it learns: a resume may change them
_FREE = {"logging_steps", "save_steps", "save_total_limit", "report_to", "wandb_project", "eval_steps", "eval_data",
         "eval_size", "vllm_server", "output_dir",
         "max_steps"}  # how long to train: a later run may train on from the newest checkpoint  # fmt: skip


def say(message: str) -> None:
    print(f"kit train: {message}", file=sys.stderr, flush=True)


def checkpoints(output_dir: str | Path) -> list[tuple[int, Path, bool]]:
    """(step, folder, complete) of every checkpoint-N folder, oldest first."""
    out = []
    folder = Path(output_dir)
    if folder.is_dir():
        for child in folder.iterdir():
            m = _CHECKPOINT.match(child.name)
            if m and child.is_dir():
                out.append((int(m[1]), child, (child / COMPLETE).is_file()))
    return sorted(out)


def resume_point(output_dir: str | Path) -> Path | None:
    """The newest complete checkpoint; newer incomplete ones (a save cut off by the limit) are removed."""
    found = checkpoints(output_dir)
    last_step, last = max(((step, folder) for step, folder, complete in found if complete), default=(-1, None))
    for step, folder, complete in found:
        if not complete and step > last_step:
            say(f"removing {folder}: its save did not finish (the job was stopped while saving)")
            shutil.rmtree(folder, ignore_errors=True)
    return last


def newest_step(output_dir: str | Path) -> int | None:
    """The step of the newest complete checkpoint, if any."""
    return max((step for step, _, complete in checkpoints(output_dir) if complete), default=None)


def training_done(output_dir: str | Path, max_steps: int) -> str | None:
    """Why a run into `output_dir` trains nothing (its final model exists and ++max_steps asks for no more steps
    than its newest checkpoint has, with how to go on), else None: no final model yet, or a higher ++max_steps
    trains on from that checkpoint."""
    final = Path(output_dir) / FINAL
    if not (final / "config.json").is_file():
        return None
    done = newest_step(output_dir)
    if done is not None and max_steps > done:
        return None
    more = f"raise ++max_steps above {done} to train on from checkpoint-{done}, " if done is not None else ""
    return (
        f"{final} exists: training is done (step {done if done is not None else '?'}); {more}or give another "
        "--output_dir (or delete it) to train again"
    )


def run_settings(cfg) -> dict:
    """The settings a TRL run records in <output_dir>/kit-train.json (its config and the training data's size)."""
    return {**asdict(cfg), "training_data_bytes": Path(cfg.training_data).stat().st_size}


def check_settings(output_dir: str | Path, settings: dict, write: bool = True) -> None:
    """The first run writes its settings; a later one (a resume) must have the same ones, except how it reports and
    saves. A change is one error naming what changed. `write=False`: only the check (at submission)."""
    path = Path(output_dir) / SETTINGS
    if path.is_file():
        old = json.loads(path.read_text())
        free = _FREE | set(FOREIGN_KEYS[settings["algorithm"]])  # another algorithm's keys (at their defaults)
        changed = [
            f"{k}: {_short(old.get(k))} → {_short(settings.get(k))}"
            for k in sorted(set(old) | set(settings))
            if k not in free and old.get(k) != settings.get(k)
        ]
        if changed:
            raise UserError(
                f"{path.parent} holds a run with other settings ({'; '.join(changed)}); resuming it would mix "
                "them. Use another --output_dir, or delete that folder to start over."
            )
    if write:
        write_atomic(path, json.dumps(settings, indent=1, sort_keys=True) + "\n")


def _short(value) -> str:
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


class SaveRequest:
    """Set by a signal handler, read by the trainer's callback between steps: save now (and stop, for TERM)."""

    def __init__(self) -> None:
        self.save = False
        self.stop = False
        self.reason = ""

    def install(self) -> None:
        def on_signal(signum, _frame):
            self.save = True
            self.stop = self.stop or signum == signal.SIGTERM
            self.reason = signal.Signals(signum).name

        signal.signal(SAVE_SIGNAL, on_signal)
        signal.signal(signal.SIGTERM, on_signal)


# what a progress line shows beside the loss, where the trainer logs it: (its key in the logs, its words)
TRAIN_SCORES = (
    ("reward", "reward"),  # GRPO: the mean reward of the step's completions
    ("accuracy", "accuracy"),  # GRPO: kit's grader reward (rewards.py): the share graded correct
    ("boxed_rate", "boxed"),  # and the share with a boxed answer
    ("rewards/margins", "reward margin"),  # DPO: chosen minus rejected implicit reward
    ("rewards/accuracies", "pair accuracy"),  # DPO: the share of pairs with chosen above rejected
)


def make_callback(request: SaveRequest):
    """A TrainerCallback: saves (and marks complete) a checkpoint when `request` asks, across all ranks at the same
    step; marks every checkpoint the trainer saved complete."""
    from transformers import TrainerCallback

    class KitCheckpoints(TrainerCallback):
        started = (0.0, 0)  # (time, step) when this run began: a resumed run counts its own pace

        def on_train_begin(self, args, state, control, **kwargs):
            self.started = (time.monotonic(), state.global_step)

        def on_log(self, args, state, control, logs=None, **kwargs):
            """A progress line per logging step ("step 20/100: loss 1.23, 0.5 s/step, ETA 40 s", with GRPO's mean
            reward, accuracy and boxed rate and DPO's reward margin and accuracy: TRAIN_SCORES), which `kit` shows
            while the job runs; the trainer's own dict stays in the log. DPO's evaluation gets a line too."""
            if not state.is_world_process_zero or not logs:
                return control
            if "eval_logps/chosen" in logs:
                say(f"step {state.global_step}/{state.max_steps}: {pair_scores(logs)}")
            # (a GRPO step with a greedy eval logs its scores with the eval's, apart from the loss)
            shown = [(key, label) for key, label in (("loss", "loss"), *TRAIN_SCORES) if key in logs]
            if not shown:
                return control
            t0, step0 = self.started
            per_step = (time.monotonic() - t0) / max(state.global_step - step0, 1)
            eta = per_step * max(state.max_steps - state.global_step, 0)
            scores = ", ".join(f"{label} {float(logs[key]):.4g}" for key, label in shown)
            say(f"step {state.global_step}/{state.max_steps}: {scores}, {per_step:.2f} s/step, ETA {eta:.0f} s")
            return control

        def on_step_end(self, args, state, control, **kwargs):
            save, stop = _agreed(request.save, request.stop)
            if save:
                say(
                    f"{request.reason or 'a signal'} received (Slurm's time limit is near): saving "
                    f"checkpoint-{state.global_step} at step {state.global_step}"
                    + ("; then stopping" if stop else "; training goes on until the limit")
                )
                control.should_save = True
                request.save = False
            if stop:
                control.should_training_stop = True
            return control

        def on_save(self, args, state, control, **kwargs):
            folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            if state.is_world_process_zero and folder.is_dir():
                (folder / COMPLETE).write_text(f"{state.global_step}\n")
                say(f"saved {folder}")
            return control

    return KitCheckpoints()


def pair_scores(logs: dict) -> str:
    """DPO's evaluation on held-out pairs, in words: the policy's log-probability margin of chosen over rejected,
    the implicit reward margin (beta x the margin's change from the reference model) and how often it is above 0."""
    margin = logs["eval_logps/chosen"] - logs["eval_logps/rejected"]
    return (
        f"held-out pairs: log-prob margin {margin:.4g}, reward margin {logs['eval_rewards/margins']:.4g}, "
        f"accuracy {logs['eval_rewards/accuracies']:.3g}"
    )


def _agreed(save: bool, stop: bool) -> tuple[bool, bool]:
    """The flags as every rank sees them (any rank that got the signal counts), so all save at the same step."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return save, stop
    import torch

    device = "cuda" if torch.cuda.is_available() and dist.get_backend() == "nccl" else "cpu"
    flags = torch.tensor([int(save), int(stop)], device=device)
    dist.all_reduce(flags, op=dist.ReduceOp.MAX)
    return bool(flags[0]), bool(flags[1])


def publish_final(
    trainer, tokenizer, output_dir: str | Path, merge_lora: bool, average_last: int = 1, dtype: str | None = None
) -> Path:
    """The trained model in Hugging Face format at <output_dir>/final, written beside it and renamed into place;
    with `average_last` > 1, the mean of its weights and those of the newest earlier complete checkpoints; with
    `dtype` (bfloat16 or float16: the base model's), its weights cast to it."""
    final = Path(output_dir) / FINAL
    tmp = Path(output_dir) / f".{FINAL}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    model = trainer.model
    if merge_lora:
        model = trainer.accelerator.unwrap_model(model).merge_and_unload()
        if trainer.accelerator.is_main_process:
            model.save_pretrained(tmp)
    else:
        trainer.save_model(str(tmp))
    if trainer.accelerator.is_main_process:
        tokenizer.save_pretrained(tmp)
        if average_last > 1:
            step = trainer.state.global_step
            earlier = [folder for n, folder, complete in checkpoints(output_dir) if complete and n < step]
            chosen = [*earlier[-(average_last - 1) :], tmp]
            say(f"final: the average of {', '.join(p.name for p in chosen[:-1])} and step {step}")
            average_checkpoints(chosen, tmp)
        if dtype is not None:
            cast_weights(tmp, dtype)
        old = final.with_name(f".{FINAL}.old-{os.getpid()}")
        if final.exists():
            final.rename(old)
        tmp.rename(final)
        shutil.rmtree(old, ignore_errors=True)
    return final
