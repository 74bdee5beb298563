"""Training throughput (see perf/README.md, "Training (issue 15)"): `kit sft` / `kit grpo` on the tiny model on CPU,
side by side with a bare TRL script (perf/bare_trl.py) on the same rows and settings, in the same run.

  python perf/bench_training.py [--rounds 5] [--sft_steps 30,230] [--grpo_steps 20,320] [--only sft|grpo]

Each round runs, interleaved, kit and the bare script at a short and a long step count. Steady-state throughput
is the difference between the two: (tokens or completions of the long run - the short run's) / (train-loop time of
the long run - the short run's), where the train-loop time is what each prints as `trained to step N in X s`; so
the first steps' warm-up and everything before trainer.train() drop out. Start-up overhead is reported
separately: the whole process's wall time (for kit: the CLI, packing the code, the local job, model load,
tokenizing, the final save) less the train-loop time. Needs the test models (tests/services/models_up.sh):
KIT_TEST_TINY_INIT (random weights, for SFT) and KIT_TEST_TINY_MODEL (trained, for GRPO).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent
KIT = shutil.which("kit", path=str(BIN)) or shutil.which("kit") or str(BIN / "kit")  # a --target install: on PATH
HERE = Path(__file__).resolve().parent
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
TARGET = 0.95
SETTINGS = {
    "sft": {"micro_batch_size": 16, "learning_rate": 1e-4, "max_length": 256},
    # GRPO at learning rate 0: the policy stays put, so both sides generate the same completions (the same work);
    # with learning, two reward functions would steer the model to different completion lengths
    "grpo": {"micro_batch_size": 8, "num_generations": 4, "max_completion_length": 32, "learning_rate": 0.0},
}


def write_data(root: Path) -> dict[str, tuple[Path, Path]]:
    """kit's records (problem + generation / expected_answer) and the same rows in TRL's conversational form, the
    user message built by kit's prompt config (data preparation is not timed)."""
    from pipeline_kit.inference.prompts import load_prompt_config

    prompt = load_prompt_config("generic/math")
    rng = random.Random(15)
    out = {}
    for algorithm, n in (("sft", 4000), ("grpo", 512)):
        records, rows = [], []
        for i in range(n):
            a, b = rng.randrange(100), rng.randrange(100)
            record = {"id": f"p{i}", "problem": f"What is {a}+{b}?", "expected_answer": str(a + b)}
            row = {"prompt": prompt.messages(record, i + 1)}
            if algorithm == "sft":
                steps = " ".join(f"Adding {a} and {b} digit by digit, step {k}." for k in range(rng.randrange(1, 6)))
                record["generation"] = f"{steps} So {a}+{b}={a + b}. The answer is \\boxed{{{a + b}}}."
                row["completion"] = [{"role": "assistant", "content": record["generation"]}]
            else:
                row["expected_answer"] = record["expected_answer"]
            records.append(record)
            rows.append(row)
        kit_file, bare_file = root / f"{algorithm}.jsonl", root / f"{algorithm}-rows.jsonl"
        kit_file.write_text("".join(json.dumps(r) + "\n" for r in records))
        bare_file.write_text("".join(json.dumps(r) + "\n" for r in rows))
        out[algorithm] = (kit_file, bare_file)
    return out


def user_repo(root: Path) -> Path:
    """A committed git repo for kit to package, like a researcher's project (a plain folder where git is missing)."""
    repo = root / "proj"
    repo.mkdir()
    (repo / "README").write_text("bench\n")
    if shutil.which("git") is None:
        return repo
    for args in (
        ["init", "-q"],
        ["add", "."],
        ["-c", "user.name=b", "-c", "user.email=b@b", "commit", "-q", "-m", "i"],
    ):
        subprocess.run(["git", *args], cwd=repo, check=True)
    return repo


def run_kit(
    algorithm: str, model: str, data: Path, out: Path, steps: int, root: Path, settings: dict | None = None, *more: str
) -> dict:
    """`kit ALGORITHM` from root/proj (KIT_HOME root/home) with SETTINGS (or `settings`; logging at the last step
    unless they say `logging_steps`) and `more` flags."""
    home = root / "home"
    overrides = [f"++{k}={v}" for k, v in {"logging_steps": steps, **(settings or SETTINGS[algorithm])}.items()]
    args = [KIT, algorithm, f"--expname={out.name}", f"--model={model}", f"--training_data={data}",
            f"--output_dir={out}", f"++max_steps={steps}", f"++save_steps={steps}", *overrides, *more]  # fmt: skip
    t0 = time.perf_counter()
    env = {**ENV, "KIT_HOME": str(home)}
    res = subprocess.run(args, cwd=root / "proj", env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    # the trainer's log, found as a user finds it: `kit logs EXPNAME` names each log (`--- PATH`) before its tail
    listing = subprocess.run([KIT, "logs", out.name, "--lines=1"], cwd=root / "proj", env=env, capture_output=True,
                             text=True).stdout  # fmt: skip
    logs = re.findall(r"^--- (\S+trainer\.log)", listing, re.M)
    text = Path(logs[-1]).read_text() if logs else res.stdout + res.stderr
    if res.returncode != 0:
        sys.exit(f"kit {algorithm} failed:\n{res.stdout[-2000:]}\n{text[-2000:]}")
    return measure(text, wall, out, steps)


def run_bare(algorithm: str, model: str, rows: Path, out: Path, steps: int, settings: dict | None = None) -> dict:
    pairs = [f"{k}={v}" for k, v in (settings or SETTINGS[algorithm]).items()]
    args = [sys.executable, str(HERE / "bare_trl.py"), algorithm, model, str(rows), str(out), f"max_steps={steps}",
            *pairs]  # fmt: skip
    t0 = time.perf_counter()
    res = subprocess.run(args, env={**ENV, "TENSORBOARD_LOGGING_DIR": str(out / "tensorboard")}, capture_output=True,
                         text=True)  # fmt: skip
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        sys.exit(f"bare {algorithm} failed:\n{res.stderr[-3000:]}")
    return measure(res.stdout + res.stderr, wall, out, steps)


def measure(log: str, wall: float, out: Path, steps: int) -> dict:
    m = re.search(rf"trained to step {steps} in ([\d.]+) ?s", log)
    if not m:
        sys.exit(f"no 'trained to step {steps}' line in:\n{log[-2000:]}")
    state = json.loads((out / f"checkpoint-{steps}" / "trainer_state.json").read_text())
    last = [e for e in state["log_history"] if "num_tokens" in e][-1]
    return {"train_s": float(m[1]), "wall_s": wall, "tokens": last["num_tokens"], "steps": steps}


def steady(short: dict, long: dict, per_step: float | None) -> float:
    """Tokens/s (SFT) or completions/s (GRPO: per_step completions a step) between the short and the long run."""
    work = (long["steps"] - short["steps"]) * per_step if per_step else long["tokens"] - short["tokens"]
    return work / (long["train_s"] - short["train_s"])


def bench(algorithm: str, model: str, files: tuple[Path, Path], step_counts: list[int], rounds: int, root: Path):
    per_step = SETTINGS[algorithm]["micro_batch_size"] if algorithm == "grpo" else None
    unit = "completions/s" if per_step else "tokens/s"
    ratios, rows = [], []
    for r in range(rounds):
        got = {"kit": [], "bare": []}
        for steps in step_counts:
            for who in ("bare", "kit") if r % 2 else ("kit", "bare"):  # alternate who goes first
                out = root / f"{algorithm}-{who}-{r}-{steps}"
                if who == "kit":
                    got[who].append(run_kit(algorithm, model, files[0], out, steps, root))
                else:
                    got[who].append(run_bare(algorithm, model, files[1], out, steps))
        rate = {who: steady(*got[who], per_step) for who in got}
        overhead = {who: statistics.mean(g["wall_s"] - g["train_s"] for g in got[who]) for who in got}
        same = [a["tokens"] for a in got["kit"]] == [b["tokens"] for b in got["bare"]]
        ratios.append(rate["kit"] / rate["bare"])
        rows.append((r, rate, overhead, same, got))
        print(
            f"{algorithm} round {r}: kit {rate['kit']:.1f} {unit}, bare {rate['bare']:.1f} {unit} -> "
            f"{ratios[-1]:.3f}; start-up + final save: kit {overhead['kit']:.1f} s, bare {overhead['bare']:.1f} s; "
            f"same tokens: {same}; train s kit {[g['train_s'] for g in got['kit']]} "
            f"bare {[g['train_s'] for g in got['bare']]}",
            flush=True,
        )
    print(f"{algorithm}: kit/bare steady-state ratio median {statistics.median(ratios):.3f} "
          f"(range {min(ratios):.3f}-{max(ratios):.3f}; target >= {TARGET})")  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sft_steps", default="30,230")
    parser.add_argument("--grpo_steps", default="20,320")
    parser.add_argument("--only", choices=("sft", "grpo"))
    args = parser.parse_args()
    models = {"sft": os.environ.get("KIT_TEST_TINY_INIT"), "grpo": os.environ.get("KIT_TEST_TINY_MODEL")}
    if not all(models.values()):
        sys.exit("source /tmp/kit-services/services.env first (KIT_TEST_TINY_INIT, KIT_TEST_TINY_MODEL)")
    with tempfile.TemporaryDirectory(prefix="kit-bench-train-") as tmp:
        root = Path(tmp)
        files = write_data(root)
        user_repo(root)
        for algorithm in ("sft", "grpo"):
            if args.only in (None, algorithm):
                counts = [int(s) for s in getattr(args, f"{algorithm}_steps").split(",")]
                bench(algorithm, models[algorithm], files[algorithm], counts, args.rounds, root)


if __name__ == "__main__":
    main()
