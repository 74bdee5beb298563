"""What a `kit sft/grpo/dpo --backend=nemo_rl` job runs inside NeMo-RL's container:

  python3 -m pipeline_kit.training.nemo_rl_job ++key=value ... <<'EOF'
  <the run config that kit rendered at submission>
  EOF

It writes the config and kit's training data in NeMo-RL's formats under <output_dir>/nemo_rl, starts a Ray cluster
over the job's nodes, runs NeMo-RL's script (which resumes from its newest step_N by itself), converts the newest
`++average_last` checkpoints to Hugging Face format with NeMo-RL's converters, and publishes <output_dir>/final
(their average when more than one)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from pipeline_kit.atomic import write_atomic
from pipeline_kit.errors import UserError
from pipeline_kit.training.checkpoints import FINAL, say
from pipeline_kit.training.config import TrainConfig, parse_train_overrides, read_training_records
from pipeline_kit.training.nemo_rl import convert_argv, launch_argv, layout
from pipeline_kit.training.pairs import SIDES, pair_messages

RAY_PORT = 6379
HEAD_VAR = "KIT_RAY_HEAD"  # the first node's host, set by the job's command line on several nodes


def training_rows(cfg: TrainConfig) -> dict[str, list[dict]]:
    """kit's records as NeMo-RL reads them: SFT chats (`messages`, the user turn from kit's prompt config); GRPO
    `problem` (the user message already built) + `expected_answer`; DPO pairs in its rank format (`context`, then
    the chosen answer at rank 0 and the rejected one at rank 1). SFT and DPO validate on ++eval_data or the first
    ++eval_size training records."""
    from pipeline_kit.inference.prompts import load_prompt_config

    prompt = load_prompt_config(cfg.prompt_config)

    def row(record: dict, line_no: int) -> dict:
        if cfg.algorithm == "dpo":
            pair = pair_messages(record, prompt, line_no)
            ranked = [{"rank": rank, "completion": pair[side]} for rank, side in enumerate(SIDES)]
            return {"context": pair["prompt"], "completions": ranked}
        messages = prompt.messages(record, line_no)
        if cfg.algorithm == "sft":
            return {"messages": [*messages, {"role": "assistant", "content": record["generation"]}]}
        return {"problem": messages[-1]["content"], "expected_answer": str(record["expected_answer"])}

    rows = [row(r, i) for i, r in enumerate(read_training_records(cfg.training_data, cfg.algorithm), 1)]
    if cfg.algorithm == "grpo":
        return {"train": rows}
    held = read_training_records(cfg.eval_data, cfg.algorithm, "++eval_data") if cfg.eval_data else []
    return {"train": rows, "validation": [row(r, i) for i, r in enumerate(held, 1)] or rows[: cfg.eval_size]}


def start_ray(num_nodes: int) -> None:
    """One Ray cluster over the job's nodes: node 0 is the head and waits for the others, which join and block."""
    head, rank = os.environ[HEAD_VAR], int(os.environ.get("SLURM_NODEID", "0"))
    if rank:
        os.execvp("ray", ["ray", "start", f"--address={head}:{RAY_PORT}", "--block"])
    subprocess.run(["ray", "start", "--head", f"--port={RAY_PORT}"], check=True)
    count = "import ray; ray.init(address='auto'); print(sum(n['Alive'] for n in ray.nodes()))"
    deadline = time.time() + 600
    while time.time() < deadline:
        res = subprocess.run([sys.executable, "-c", count], capture_output=True, text=True)
        if res.returncode == 0 and res.stdout.strip().isdigit() and int(res.stdout.strip()) >= num_nodes:
            os.environ["RAY_ADDRESS"] = f"{head}:{RAY_PORT}"
            return
        time.sleep(5)
    raise UserError(f"only some of the {num_nodes} nodes joined the Ray cluster at {head}:{RAY_PORT} in 600 s.")


def steps(checkpoint_dir: str) -> list[tuple[int, Path]]:
    found = [(int(p.name[5:]), p) for p in Path(checkpoint_dir).glob("step_*") if p.name[5:].isdigit()]
    return sorted(found)


def weights_dir(cfg: TrainConfig, step_dir: Path) -> Path:
    weights = step_dir / "policy" / "weights"
    if cfg.strategy == "megatron":
        iters = sorted(weights.glob("iter_*"))
        return iters[-1] if iters else weights / "iter_0000000"
    return weights / "model" if (weights / "model").is_dir() else weights


def to_hf(cfg: TrainConfig, nemo_rl_dir: str, step: int, step_dir: Path) -> Path:
    """step_N in Hugging Face format under nemo_rl/hf (once), with the checkpoint's tokenizer."""
    out = Path(layout(cfg.output_dir)["hf"]) / f"step_{step}"
    if (out / "config.json").is_file():
        return out
    tmp = out.with_name(f".{out.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.parent.mkdir(parents=True, exist_ok=True)
    argv = convert_argv(cfg, str(step_dir), str(tmp), str(weights_dir(cfg, step_dir)))
    say(f"converting step {step}: {' '.join(argv)}")
    subprocess.run(argv, cwd=nemo_rl_dir, check=True)
    tokenizer = step_dir / "policy" / "tokenizer"
    for item in tokenizer.iterdir() if tokenizer.is_dir() else []:
        if item.is_file():
            shutil.copy2(item, tmp / item.name)
    tmp.rename(out)
    return out


def publish(cfg: TrainConfig, nemo_rl_dir: str, chosen: list[tuple[int, Path]]) -> Path:
    hf = [to_hf(cfg, nemo_rl_dir, step, folder) for step, folder in chosen]
    final = Path(cfg.output_dir) / FINAL
    if len(hf) > 1:  # in NeMo-RL's environment, which has torch and safetensors
        argv = ["uv", "run", "python", "-m", "pipeline_kit.training.averaging", str(final), *map(str, hf)]
        say(f"final: the average of {', '.join(p.name for p in hf)}")
        subprocess.run(argv, cwd=nemo_rl_dir, check=True)
        return final
    tmp = final.with_name(f".{FINAL}.tmp-{os.getpid()}")
    shutil.copytree(hf[0], tmp)
    tmp.rename(final)
    return final


def run(cfg: TrainConfig, config_text: str) -> int:
    import yaml

    final = Path(cfg.output_dir) / FINAL
    if (final / "config.json").is_file():
        say(f"{final} exists: training is done (delete it, or use another --output_dir, to train again)")
        return 0
    config = yaml.safe_load(config_text)
    nemo_rl_dir = str(Path(config["defaults"]).parents[2])  # <dir>/examples/configs/<name>.yaml
    num_nodes = config["cluster"]["num_nodes"]
    if num_nodes > 1:
        start_ray(num_nodes)  # returns on the head node only
    paths = layout(cfg.output_dir)
    for split, rows in training_rows(cfg).items():
        write_atomic(f"{paths['data']}/{split}.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    write_atomic(paths["config"], config_text)
    before = steps(paths["checkpoints"])
    say(f"{cfg.algorithm} with NeMo-RL ({cfg.strategy}) in {nemo_rl_dir}; " + (
        f"resuming from {before[-1][1]} (step {before[-1][0]})" if before else "starting at step 0"))  # fmt: skip
    t0 = time.time()
    rc = subprocess.run(launch_argv(cfg), cwd=nemo_rl_dir).returncode
    if rc:
        raise SystemExit(rc)
    saved = steps(paths["checkpoints"])
    if not saved:
        raise UserError(f"NeMo-RL saved no checkpoint in {paths['checkpoints']}; see its log above.")
    last = saved[-1][0]
    budget = config["checkpointing"]["checkpoint_must_save_by"]
    if (cfg.max_steps > 0 and last < cfg.max_steps) or (cfg.max_steps <= 0 and budget and _out_of_time(t0, budget)):
        say(f"stopped at step {last} before the time limit (checkpoint_must_save_by {budget}); a new job resumes")
        return 0
    say(f"trained to step {last} in {time.time() - t0:.2f}s")
    print(f"kit train: saved {publish(cfg, nemo_rl_dir, saved[-cfg.average_last :])}")
    return 0


def _out_of_time(t0: float, dhms: str) -> bool:
    d, h, m, s = (int(x) for x in dhms.split(":"))
    return time.time() - t0 >= d * 86400 + h * 3600 + m * 60 + s


def main(argv: list[str] | None = None) -> int:
    try:
        cfg = parse_train_overrides(list(sys.argv[1:] if argv is None else argv))
        return run(cfg, sys.stdin.read())
    except UserError as e:
        print(f"kit train: error: {e}", file=sys.stderr)
        return 2
    except subprocess.CalledProcessError as e:
        print(f"kit train: error: {' '.join(map(str, e.cmd))} failed with exit code {e.returncode}", file=sys.stderr)
        return e.returncode or 1


if __name__ == "__main__":
    sys.exit(main())
