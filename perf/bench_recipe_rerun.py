"""A finished recipe's rerun reads no checkpoint bytes: `kit run_recipe aimo` over a finished recipe whose base model
holds a 1 GiB weights file, against the same with a 1 MiB one, measured side by side in one run (issue 25), plus the
recipe's dry run against the 3 s target.

  python perf/bench_recipe_rerun.py [--rounds 5] [--big_mib 1024]

For each size: a model folder (config.json + model.safetensors of that size), ROUNDS+1 dry runs of the recipe (the
first reads the weights once and caches each file's digest by path, size and times, as a user's first run does),
every stage marked done with its key, then `kit run_recipe aimo ...` run ROUNDS times: it must print "nothing to
submit". Each rerun's wall time and the bytes its process read (/proc/self/io `rchar`, every read() of the
process: Python's own imports included) are reported; the 1 GiB rerun must be within 0.5 s of the 1 MiB one and
read far less than 1 GiB.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import bytecode_cache  # perf/: .pyc files as a user has them

KIT = Path(sys.executable).parent / "kit"
# runs kit's CLI and prints the process's read bytes at exit (the CLI ends with SystemExit)
READS = (
    "import atexit, sys\n"
    "atexit.register(lambda: print('rchar', dict(l.split(': ') for l in open('/proc/self/io').read().splitlines())"
    "['rchar'], file=sys.stderr))\n"
    "from pipeline_kit.cli.main import entry\n"
    "sys.argv = ['kit', *sys.argv[1:]]\n"
    "entry()\n"
)


def make_model(folder: Path, size: int) -> None:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"model_type": "qwen2", "bench": size}))
    block = os.urandom(1 << 20)
    with open(folder / "model.safetensors", "wb") as f:
        for _ in range(size >> 20):
            f.write(block)


def recipe_argv(root: Path, model: Path) -> list[str]:
    return [
        "run_recipe", "aimo", f"--base_model={model}", f"--output_dir={root / 'out'}",
        f"--cot_data={root / 'cot.jsonl'}", f"--tir_data={root / 'tir.jsonl'}", f"--rl_data={root / 'rl.jsonl'}",
        "--benchmarks=arith:1", f"--data_dir={root.parent / 'data'}", "--server_type=transformers",
        "--grpo_args=++micro_batch_size=8",
    ]  # fmt: skip


def mark_done(root: Path, model: Path) -> None:
    """Plan the recipe as `kit run_recipe` does and write every stage's .stage.done with its key (what the stages'
    last jobs write)."""
    from pipeline_kit.cluster import load_cluster_config
    from pipeline_kit.recipes import stages as st
    from pipeline_kit.recipes.registry import load_recipe

    recipe = load_recipe("aimo")
    params = recipe.module.Params(
        base_model=str(model), output_dir=str(root / "out"), cot_data=str(root / "cot.jsonl"),
        tir_data=str(root / "tir.jsonl"), rl_data=str(root / "rl.jsonl"), benchmarks="arith:1",
        data_dir=str(root.parent / "data"), server_type="transformers",
        grpo_args="++micro_batch_size=8",
    )  # fmt: skip
    plans = st.plan_stages("aimo", recipe.module.stages(load_cluster_config(None), params))
    for plan in plans:
        Path(plan.stage.folder).mkdir(parents=True, exist_ok=True)
        for output in plan.stage.outputs:
            Path(output).parent.mkdir(parents=True, exist_ok=True)
            Path(output).write_text("{}")
        (Path(plan.stage.folder) / st.DONE).write_text(json.dumps({"key": plan.key}) + "\n")


def timed(argv: list[str], env: dict, expect: str) -> tuple[float, int]:
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", READS, *argv], env=env, cwd=env["KIT_BENCH_CWD"], capture_output=True, text=True
    )
    elapsed = time.perf_counter() - start
    if proc.returncode != 0 or expect not in proc.stderr:
        raise SystemExit(f"kit {' '.join(argv[:2])} failed ({proc.returncode}): {proc.stderr.strip()[-800:]}")
    rchar = int(next(line for line in proc.stderr.splitlines() if line.startswith("rchar")).split()[1])
    return elapsed, rchar


def main() -> None:
    bytecode_cache.enable()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--big_mib", type=int, default=1024)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        env = {
            **os.environ,
            "KIT_BENCH_CWD": tmp,
            "KIT_DIGEST_CACHE": str(root / "digests.json"),
            "KIT_HOME": str(root / "kit-home"),
        }
        os.environ.update(env)
        data = json.dumps({"problem": "1+1?", "generation": r"\boxed{2}", "expected_answer": "2"}) + "\n"
        subprocess.run([KIT, "prepare_data", "arith", f"--data_dir={root / 'data'}"], env=env, check=True,
                       capture_output=True)  # fmt: skip
        rows, reruns = [], {}
        for label, mib in (("1 MiB", 1), (f"{args.big_mib} MiB", args.big_mib)):
            case = root / label.replace(" ", "")
            model = case / "base-model"
            make_model(model, mib << 20)
            for name in ("cot", "tir", "rl"):
                (case / f"{name}.jsonl").write_text(data * 4)
            dry_runs = [timed([*recipe_argv(case, model), "--dry_run"], env, "aimo") for _ in range(args.rounds + 1)]
            dry = [t for t, _ in dry_runs]
            mark_done(case, model)
            runs = [timed(recipe_argv(case, model), env, "nothing to submit") for _ in range(args.rounds)]
            reruns[mib] = statistics.median(t for t, _ in runs)
            rows.append(
                f"| {label} | {dry[0]:.2f}, read {dry_runs[0][1] / 2**20:.0f} MiB | {statistics.median(dry[1:]):.2f} ({min(dry[1:]):.2f}-{max(dry[1:]):.2f}) "
                f"| {reruns[mib]:.2f} ({min(t for t, _ in runs):.2f}-{max(t for t, _ in runs):.2f}) | "
                f"{max(r for _, r in runs) / 2**20:.1f} |"
            )
        print(f"rounds: {args.rounds}; medians (min-max), seconds; python {sys.version.split()[0]}, "
              f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")  # fmt: skip
        print("| base model weights | first dry run (digests the weights), its reads | later dry runs (target 3 s) | "
              "rerun of the finished recipe | rerun's reads, MiB (max) |")  # fmt: skip
        print("|---|---|---|---|---|")
        print("\n".join(rows))
        gap = reruns[args.big_mib] - reruns[1]
        print(f"rerun {args.big_mib} MiB - rerun 1 MiB: {gap:+.2f} s (target within 0.5 s)")


if __name__ == "__main__":
    main()
