"""Launch-side figures of issue 36 part 3, two source trees side by side (see perf/README.md, "Dry runs, plans and
done reruns"):

  python perf/bench_launch.py BEFORE_TREE AFTER_TREE [--rounds 5]

Each round runs every command once per tree, the trees' order reversed every other round, from this venv with
PYTHONPATH=<tree>. Per command and tree: the median wall time and CPU time (user + sys of the process and its
children, from wait4) over the rounds, and after/before. The commands: `kit generate --dry_run` of 100 chunks x 8
seeds on a Slurm config; `kit eval --dry_run` of two benchmarks x 16 seeds x 10 chunks; `kit plan generate` of the
same 800 units (a 5,000-row input, 3 measured jobs); a fully done rerun of `kit generate` on none (100 problems x
8 seeds, generated once per tree against perf/fast_stub_server.py); `kit run_cmd --command=true` on none."""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import bytecode_cache  # noqa: E402  (perf/: .pyc files as a user has them)
from bench_core import write_plan_inputs  # noqa: E402

BIN = Path(sys.executable).parent
PORT = 18977


def run(argv: list[str], env: dict, cwd: Path) -> tuple[float, float]:
    """Wall and CPU seconds (the process and its children) of one command, which must succeed."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(
            f"{' '.join(map(str, argv))} failed ({proc.returncode}): {proc.stderr.read().decode()[-2000:]}"
        )
    return wall, usage.ru_utime + usage.ru_stime


def commands(d: Path, out: Path) -> dict[str, list[str]]:
    kit = str(BIN / "kit")
    gen = [kit, "generate", "--cluster=slurm", f"--config_dir={d}", "--model=/models/qwen", "--server_gpus=8"]
    gen += ["--input_file=/data/in.jsonl", "--output_dir=/data/out", "--num_chunks=100", "--num_random_seeds=8"]
    gen += ["++prompt_config=generic/math", "++inference.temperature=0.7", "++inference.tokens_to_generate=4096"]
    ev = [kit, "eval", "--cluster=slurm", f"--config_dir={d}", "--model=/models/qwen", "--server_gpus=8"]
    ev += ["--benchmarks=math500:16,aime24:16", "--num_chunks=10", "--output_dir=/data/eval", "--data_dir=/data/b"]
    plan = [kit, "plan", *gen[1:], "--nodes_free=32"]
    plan = [a.replace("/data/in.jsonl", f"{d}/in.jsonl") for a in plan]
    rerun = [kit, "generate", "--cluster=none", f"--config_dir={d}", "--server_type=openai", "--model=stub"]
    rerun += [f"--server_address=http://127.0.0.1:{PORT}/v1", f"--input_file={d}/small.jsonl", f"--output_dir={out}"]
    rerun += ["--num_random_seeds=8", "++inference.tokens_to_generate=8"]
    none = [kit, "run_cmd", "--cluster=none", f"--config_dir={d}", "--expname=true", "--command=true"]
    return {
        "generate --dry_run 100x8 (Slurm)": [*gen, "--dry_run"],
        "eval --dry_run 2 benchmarks x 16 seeds x 10 chunks (Slurm)": [*ev, "--dry_run"],
        "plan generate, 800 units": plan,
        "generate, fully done rerun (none)": rerun,
        "run_cmd --command=true (none)": none,
    }


def main() -> None:
    bytecode_cache.enable()
    ap = argparse.ArgumentParser()
    ap.add_argument("trees", nargs=2, help="BEFORE and AFTER source trees")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    d = Path(tempfile.mkdtemp())
    (d / "slurm.yaml").write_text(f"executor: slurm\njob_dir: {d}/jobs\naccount: root\npartition: debug\n")
    (d / "none.yaml").write_text(f"executor: none\njob_dir: {d}/jobs\n")
    (d / "small.jsonl").write_text("".join(f'{{"problem": "{i} + 1"}}\n' for i in range(100)))
    write_plan_inputs(d)
    stub = subprocess.Popen([sys.executable, str(Path(__file__).parent / "fast_stub_server.py"), str(PORT)])
    trees = {"before": args.trees[0], "after": args.trees[1]}
    env = {
        name: {**os.environ, "PYTHONPATH": tree, "KIT_HOME": str(d / f"home-{name}")} for name, tree in trees.items()
    }
    results: dict[tuple[str, str], list[tuple[float, float]]] = {}
    loads = []
    try:
        time.sleep(1)
        for name in trees:  # each tree's output to rerun, and its caches (help, templates) warm
            cmds = commands(d, d / f"out-{name}")
            for argv in cmds.values():
                run(argv, env[name], d)
        for r in range(args.rounds):
            loads.append(os.getloadavg()[0])
            for name in trees if r % 2 == 0 else list(trees)[::-1]:
                for what, argv in commands(d, d / f"out-{name}").items():
                    results.setdefault((what, name), []).append(run(argv, env[name], d))
    finally:
        stub.terminate()
    print(f"{args.rounds} rounds; load (1 min) at round starts: {[round(x, 1) for x in loads]}")
    print("| command | before wall / CPU | after wall / CPU | after/before (wall, CPU) |")
    print("|---|---|---|---|")
    for what in commands(d, d):
        cells = []
        medians = {}
        for name in trees:
            walls, cpus = zip(*results[(what, name)], strict=True)
            medians[name] = (statistics.median(walls), statistics.median(cpus))
            cells.append(f"{medians[name][0]:.2f} s / {medians[name][1]:.2f} s")
        ratio = [medians["after"][i] / medians["before"][i] for i in (0, 1)]
        print(f"| {what} | {cells[0]} | {cells[1]} | {ratio[0]:.2f}x, {ratio[1]:.2f}x |")


if __name__ == "__main__":
    main()
