"""Core speed figures, as ratios to a baseline taken in the same run (see perf/README.md).

  python perf/bench_core.py [--slurm]   (--slurm also submits 800 units to the local test cluster)
Also times `kit generate --dry_run` for 100 chunks x 8 seeds (the same shape, built by the CLI).
Shape of the 800-unit pipeline: one generate-shaped job (a vLLM-like server service + a client in one group,
1 GPU) as a Slurm array of 100 chunks x 8 seeds, unit -> (chunk, seed) from $KIT_UNIT."""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import bytecode_cache  # perf/: .pyc files as a user has them

BIN = Path(sys.executable).parent


def timed(argv, n=5, **kw) -> float:
    runs = []
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True, **kw)
        runs.append(time.perf_counter() - t)
    return statistics.median(runs)


PIPELINE = """
import sys
from pipeline_kit.cluster import load_cluster_config
from pipeline_kit.pipeline import AUTO_PORT, Command, CommandGroup, HardwareConfig, Job, Pipeline
try:  # the same script measures trees from before and after Pipeline.run() moved to launch.run_pipeline()
    from pipeline_kit.launch import run_pipeline
except ImportError:
    def run_pipeline(pipeline, dry_run=False, wait=None):
        return pipeline.run(dry_run=dry_run, wait=wait)
def client(refs):
    return f"echo chunk=$((KIT_UNIT % 100)) seed=$((KIT_UNIT / 100)) server={refs['server'].address}"
if __name__ == "__main__":
    cluster = load_cluster_config(sys.argv[1], sys.argv[2])
    server = Command("sleep 1000", name="server", port=AUTO_PORT, service=True, num_gpus=1)
    cmds = [server, Command(client, name="client", refs={"server": server})]
    # --begin keeps the units pending, so they do not compete with the submitter for this VM's 2 cores
    hw = HardwareConfig(num_gpus=1, sbatch_kwargs={"begin": "now+600"})
    job = Job("gen", groups=[CommandGroup(cmds, hw, name="gen")], array_size=800)
    r = run_pipeline(Pipeline("bench800", cluster, [job], allow_uncommitted=True), dry_run=sys.argv[3] == "dry")
    print(len(r.dry_run_text), r.slurm_ids)
"""


def write_plan_inputs(d: Path) -> None:
    """A 5,000-row input and the figures of three measured jobs of /models/qwen on vllm (8 GPUs) under d/jobs."""
    from pipeline_kit.measurements import JobFigures, ServerKey, UnitFigures, figures_file, write_figures

    (d / "in.jsonl").write_text("".join(f'{{"problem": "{i} + 1"}}\n' for i in range(5000)))
    for i in range(3):
        units = (UnitFigures("rs0_chunk_0", 50, 200_000, 170.0),)
        figures = JobFigures(ServerKey("/models/qwen", "vllm", 8, 1), "generic/math", 512, 360.0, 30.0, 170.0, units)
        write_figures(figures_file(d / "jobs" / "logs" / f"e{i}" / "run", "gen"), figures)


def main() -> None:
    bytecode_cache.enable()
    env = {**os.environ, "KIT_HOME": tempfile.mkdtemp()}
    where = "import importlib.util, pipeline_kit; print(pipeline_kit.__file__, bool(importlib.util.find_spec('torch')))"
    out = subprocess.run([sys.executable, "-c", where], capture_output=True, text=True, cwd=tempfile.gettempdir())
    kit_file, torch = out.stdout.split()
    print(f"{sys.executable}: pipeline_kit from {Path(kit_file).parent}; torch installed: {torch}")
    subprocess.run([BIN / "kit", "--help"], env=env, capture_output=True)  # fills the help cache
    base = timed([sys.executable, "-c", "pass"])
    helps = timed([BIN / "kit", "--help"], env=env)
    print(f"python -c pass: {base * 1000:.1f} ms; kit --help: {helps * 1000:.1f} ms; ratio {helps / base:.2f}x")
    d = Path(tempfile.mkdtemp())
    (d / "slurm.yaml").write_text(f"executor: slurm\njob_dir: {d}/jobs\naccount: root\npartition: debug\n")
    (d / "p.py").write_text(PIPELINE)
    dry = timed([sys.executable, d / "p.py", "slurm", str(d), "dry"], n=3, env=env, cwd=d)
    bare = timed([sys.executable, "-c", "import nemo_run"], n=3)  # nemo-run's own import, Lepton SDK included
    print(f"dry run, 800 units (1 array job): {dry:.2f} s; plain `import nemo_run`: {bare:.2f} s ({dry / bare:.2f}x)")
    gen = [BIN / "kit", "generate", "--cluster=slurm", f"--config_dir={d}", "--model=/models/qwen", "--server_gpus=8"]
    gen += ["--input_file=/data/in.jsonl", "--output_dir=/data/out", "--num_chunks=100", "--num_random_seeds=8"]
    gen += ["++prompt_config=generic/math", "++inference.temperature=0.7", "++inference.tokens_to_generate=4096"]
    gen_dry = timed([*gen, "--dry_run"], n=3, env=env, cwd=d)
    print(f"kit generate --dry_run, 100 chunks x 8 seeds: {gen_dry:.2f} s ({gen_dry / bare:.2f}x import nemo_run)")
    # kit plan of the same 800 units over an input this machine reads (5,000 rows) and measured figures of 3 jobs
    write_plan_inputs(d)
    plan = [BIN / "kit", "plan", "generate", *gen[2:], "--nodes_free=32"]
    plan = [a.replace("/data/in.jsonl", f"{d}/in.jsonl") for a in map(str, plan)]
    plan_s = timed(plan, n=5, env=env, cwd=d)
    print(f"kit plan generate, 100 chunks x 8 seeds (800 units, measured figures): {plan_s:.2f} s")
    if "--slurm" in sys.argv:
        subs, exits = [], []
        for _ in range(3):
            t = time.perf_counter()
            proc = subprocess.Popen(
                [sys.executable, d / "p.py", "slurm", str(d), "run"], env=env, cwd=d, stdout=subprocess.PIPE, text=True
            )
            line = proc.stdout.readline()  # printed right after Pipeline.run() returned: sbatch has answered
            subs.append(time.perf_counter() - t)
            proc.wait()
            exits.append(time.perf_counter() - t)
            job_id = re.search(r"'gen': \['(\d+)'\]", line).group(1)
            squeue = ["squeue", "-h", "-r", "-j", job_id, "-o", "%i"]
            queued = subprocess.run(squeue, capture_output=True, text=True).stdout.split()
            print(f"submit 800 units: {subs[-1]:.2f} s until queued ({exits[-1]:.2f} s to exit); squeue: {len(queued)}")
            subprocess.run(["scancel", job_id], check=False)
        print(f"submit 800 units, median of 3: {statistics.median(subs):.2f} s (exit {statistics.median(exits):.2f} s)")


if __name__ == "__main__":
    main()
