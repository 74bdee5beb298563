"""The GPU check (issue 35, part 4): kit's training and eval on one GPU, in bf16, on a model of real shape, with a
bare TRL script beside `kit sft` on the same rows and settings. perf/gpu_check.sh installs what the machine lacks
and runs this; tests/test_gpu_check.py runs the same steps on CPU with a tiny shape, so that they cannot rot.

  python perf/gpu_check.py --out FILE [--device cuda|cpu]

Steps, each recorded with its command's exit and wall time, none stopping the others:
  model   random weights made here: on cuda the body of Qwen2.5-0.5B (24 layers, hidden 896, 14 heads, 2 KV heads,
          MLP 4864; 0.36B parameters besides the embeddings) in bf16, with the quickstart's tokenizer (trained here,
          ~1000 tokens: no model hub), so the LM head is smaller than Qwen's 151,936-token one; on cpu 2 layers of 128
  sft     `kit sft` and perf/bare_trl.py on the same rows and settings, one run each: tokens/s between the first
          and the last logged step (the TensorBoard events' wall times), so that the warm-up stays out
  dpo     `kit dpo` for a few steps on addition pairs made here (the right boxed sum over a wrong one): pairs/s of
          its train loop, and the log-prob margin of chosen over rejected on held-out pairs before and after
  grpo    `kit grpo` for a few steps (generation by the trainer): completions/s of its train loop
  eval    `kit prepare_data arith`, then `kit eval` with the transformers server on the device
FILE gets one JSON object: the machine, then each step's exit, wall time and figures. Exits 1 if a step failed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "recipes" / "quickstart")]

import bench_training as bench  # noqa: E402  (perf/: the kit-vs-bare measurement, shared)

from pipeline_kit.atomic import write_atomic  # noqa: E402

# The model's shape on each device; Qwen2.5-0.5B's body on cuda
SHAPES = {
    "cuda": {"hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24, "num_attention_heads": 14,
             "num_key_value_heads": 2, "max_position_embeddings": 4096, "rope_theta": 1000000.0},
    "cpu": {"hidden_size": 128, "intermediate_size": 384, "num_hidden_layers": 2, "num_attention_heads": 2,
            "num_key_value_heads": 1, "max_position_embeddings": 512},
}  # fmt: skip
# SFT's steps and its logging interval, GRPO's steps, and the eval's size, per device
PLAN = {
    "cuda": {"sft_steps": (300, 50), "grpo_steps": 8, "dpo_steps": 20, "eval_problems": 16, "eval_tokens": 64,
             "corpus": 20000},
    "cpu": {"sft_steps": (4, 2), "grpo_steps": 2, "dpo_steps": 2, "eval_problems": 4, "eval_tokens": 8, "corpus": 2000},
}  # fmt: skip
SFT = {"micro_batch_size": 16, "learning_rate": 1e-4, "max_length": 256}
GRPO = {"micro_batch_size": 8, "num_generations": 4, "max_completion_length": 32, "learning_rate": 1e-6}
DPO = {"micro_batch_size": 8, "learning_rate": 1e-5, "max_length": 256, "beta": 0.1}


def machine(device: str) -> dict:
    from importlib.metadata import version

    import torch  # make_model needs it anyway; trl is only asked for its version (its import costs seconds)

    info = {"device": device, "python": platform.python_version(), "torch": torch.__version__,
            "transformers": version("transformers"), "trl": version("trl"), "cpus": os.cpu_count()}  # fmt: skip
    if device == "cuda":
        info["gpu"] = torch.cuda.get_device_name(0)
        info["gpu_memory_gib"] = round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1)
    return info


def make_model(out: Path, device: str) -> dict:
    import torch
    from make_tiny_model import SEED, corpus, train_tokenizer
    from tiny_common import ENDOFTEXT, IM_END, save_tokenizer
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(SEED)
    tokenizer = train_tokenizer(corpus(random.Random(SEED), PLAN[device]["corpus"]))
    eos, pad = tokenizer.convert_tokens_to_ids(IM_END), tokenizer.convert_tokens_to_ids(ENDOFTEXT)
    dtype = "bfloat16" if device == "cuda" else "float32"
    config = Qwen2Config(vocab_size=len(tokenizer), tie_word_embeddings=True, bos_token_id=pad, eos_token_id=eos,
                         pad_token_id=pad, dtype=dtype, **SHAPES[device])  # fmt: skip
    model = Qwen2ForCausalLM(config).to(getattr(torch, dtype))
    model.generation_config = GenerationConfig(bos_token_id=pad, eos_token_id=[eos, pad], pad_token_id=pad)
    model.save_pretrained(out)
    save_tokenizer(tokenizer, out)
    params = sum(p.numel() for p in model.parameters())
    body = params - model.get_input_embeddings().weight.numel()
    return {"parameters": params, "parameters_besides_embeddings": body, "vocab": len(tokenizer), "dtype": dtype}


def sft(model: str, files: dict, root: Path, device: str) -> dict:
    """kit, then bare TRL, one run each. Tokens/s between the first and the last logged step, from the wall times of
    the TensorBoard events each run writes: the first steps' warm-up (10-14 s on an H100, and varying by seconds
    between runs, more than the steps themselves take) stays out."""
    steps, every = PLAN[device]["sft_steps"]
    settings = {**SFT, "logging_steps": every}
    got = {}
    for who in ("kit", "bare"):
        out = root / f"sft-{who}"
        if who == "kit":
            run = bench.run_kit("sft", model, files["sft"][0], out, steps, root, settings, *GPUS[device])
        else:
            run = bench.run_bare("sft", model, files["sft"][1], out, steps, settings)
        got[who] = {**run, **logged_rate(out / "tensorboard")}
    rate = {who: got[who]["tokens_per_s"] for who in got}
    return {
        "settings": settings,
        "kit_tokens_per_s": round(rate["kit"], 1),
        "bare_trl_tokens_per_s": round(rate["bare"], 1),
        "kit_over_bare": round(rate["kit"] / rate["bare"], 3),
        "same_tokens": got["kit"]["tokens"] == got["bare"]["tokens"],
        "runs": got,
    }


def logged_rate(tensorboard: Path) -> dict:
    """Tokens/s between the first and the last `train/num_tokens` event of a run's TensorBoard log."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    (run_dir,) = {f.parent for f in tensorboard.rglob("events.out.tfevents.*")}
    events = EventAccumulator(str(run_dir)).Reload().Scalars("train/num_tokens")
    first, last = events[0], events[-1]
    return {
        "tokens_per_s": (last.value - first.value) / (last.wall_time - first.wall_time),
        "timed_steps": [first.step, last.step],
        "timed_s": round(last.wall_time - first.wall_time, 2),
    }


def dpo(model: str, files: dict, root: Path, device: str) -> dict:
    """`kit dpo`, evaluated on held-out pairs before the first step and after the last one."""
    steps = PLAN[device]["dpo_steps"]
    train, held = write_pairs(root / "pairs.jsonl", 512, 0), write_pairs(root / "held_pairs.jsonl", 32, 1)
    settings = {**DPO, "eval_steps": steps, "eval_data": held}
    out = root / "dpo-kit"
    run = bench.run_kit("dpo", model, train, out, steps, root, settings, *GPUS[device])
    state = json.loads((out / f"checkpoint-{steps}" / "trainer_state.json").read_text())
    margin = {e["step"]: e["eval_logps/chosen"] - e["eval_logps/rejected"] for e in state["log_history"]
              if "eval_logps/chosen" in e}  # fmt: skip
    return {"settings": DPO, **run, "pairs_per_s": round(steps * DPO["micro_batch_size"] / run["train_s"], 2),
            "held_out_margin": {"before": margin[0], "after": margin[steps]}}  # fmt: skip


def write_pairs(path: Path, n: int, seed: int) -> Path:
    """n pairs 'What is a+b?' (two-digit numbers): the right boxed sum chosen over a wrong one."""
    rng = random.Random(seed)
    lines = []
    for _ in range(n):
        a, b = rng.randrange(100), rng.randrange(100)
        lines.append(json.dumps({"problem": f"What is {a}+{b}?", "chosen": f"So {a}+{b}={a + b}. \\boxed{{{a + b}}}",
                                 "rejected": f"So {a}+{b}={a + b + 10}. \\boxed{{{a + b + 10}}}"}))  # fmt: skip
    write_atomic(path, "\n".join(lines) + "\n")
    return path


def grpo(model: str, files: dict, root: Path, device: str) -> dict:
    steps = PLAN[device]["grpo_steps"]
    run = bench.run_kit("grpo", model, files["grpo"][0], root / "grpo-kit", steps, root, GRPO, *GPUS[device])
    return {"settings": GRPO, **run, "completions_per_s": round(steps * GRPO["micro_batch_size"] / run["train_s"], 2)}


def evaluate(model: str, files: dict, root: Path, device: str) -> dict:
    plan, data, out = PLAN[device], root / "data", root / "eval"
    env = {**bench.ENV, "KIT_HOME": str(root / "home")}
    commands = [
        [bench.KIT, "prepare_data", "arith", f"--data_dir={data}"],
        [bench.KIT, "eval", "--expname=gpu-check-eval", "--server_type=transformers", f"--model={model}",
         f"--server_gpus={1 if device == 'cuda' else 0}", "--benchmarks=arith:2", f"--data_dir={data}",
         f"--output_dir={out}", f"++max_samples={plan['eval_problems']}",
         f"++inference.tokens_to_generate={plan['eval_tokens']}", "++max_concurrent_requests=8"],
    ]  # fmt: skip
    result = {}
    for args in commands:
        t0 = time.perf_counter()
        res = subprocess.run(args, cwd=root / "proj", env=env, capture_output=True, text=True)
        result[args[1]] = {"rc": res.returncode, "wall_s": round(time.perf_counter() - t0, 1)}
        if res.returncode != 0:
            raise SystemExit(
                f"kit {args[1]} failed (exit {res.returncode}):\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
            )
    samples = sum(1 for f in out.rglob("output-rs*.jsonl") for _ in f.open())
    result["samples"] = samples
    result["summary"] = res.stdout[-1500:]
    return result


GPUS = {"cuda": ("--num_gpus=1",), "cpu": ()}
STEPS = {"sft": sft, "dpo": dpo, "grpo": grpo, "eval": evaluate}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--root", type=Path, help="work folder [a new temporary one]")
    parser.add_argument("--only", help="comma-separated steps to run [all: sft,dpo,grpo,eval]")
    args = parser.parse_args()
    root = args.root or Path(tempfile.mkdtemp(prefix="kit-gpu-check-"))
    report: dict = {"machine": machine(args.device), "steps": {}}
    t0 = time.perf_counter()
    model = root / "model"
    report["steps"]["model"] = make_model(model, args.device)
    files = bench.write_data(root)
    bench.user_repo(root)
    failed = []
    for name, step in STEPS.items():
        if args.only and name not in args.only.split(","):
            continue
        t = time.perf_counter()
        try:
            entry = {"rc": 0, **step(str(model), files, root, args.device)}
        except (Exception, SystemExit) as e:  # bench's helpers sys.exit with the failed command's output
            failed.append(name)
            entry = {"rc": 1, "error": str(e)[-4000:] or traceback.format_exc()[-4000:]}
        entry["wall_s"] = round(time.perf_counter() - t, 1)
        report["steps"][name] = entry
        print(f"{name}: {json.dumps({k: v for k, v in entry.items() if k not in ('runs', 'summary')})}", flush=True)
        write(args.out, report)  # after each step: a step that hangs past the machine's limit leaves the others
    report["wall_s"] = round(time.perf_counter() - t0, 1)
    report["failed"] = failed
    write(args.out, report)
    return 1 if failed else 0


def write(path: Path, report: dict) -> None:
    write_atomic(path, json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
