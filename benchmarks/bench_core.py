"""Core speed figures, as ratios to a baseline taken in the same run (see BENCHMARKS.md).

  python benchmarks/bench_core.py [--slurm]   (--slurm also submits 800 units to the local test cluster)
Shape of the 800-unit pipeline: one generate-shaped job (a vLLM-like server service + a client in one group,
1 GPU) as a Slurm array of 100 chunks x 8 seeds, unit -> (chunk, seed) from $KIT_UNIT."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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
def client(refs):
    return f"echo chunk=$((KIT_UNIT % 100)) seed=$((KIT_UNIT / 100)) server={refs['server'].address}"
if __name__ == "__main__":
    cluster = load_cluster_config(sys.argv[1], sys.argv[2])
    server = Command("sleep 1000", name="server", port=AUTO_PORT, service=True, num_gpus=1)
    cmds = [server, Command(client, name="client", refs={"server": server})]
    job = Job("gen", groups=[CommandGroup(cmds, HardwareConfig(num_gpus=1), name="gen")], array_size=800)
    r = Pipeline("bench800", cluster, [job], allow_uncommitted=True).run(dry_run=sys.argv[3] == "dry")
    print(len(r.dry_run_text), r.slurm_ids)
"""


def main() -> None:
    env = {**os.environ, "KIT_HOME": tempfile.mkdtemp()}
    subprocess.run([BIN / "kit", "--help"], env=env, capture_output=True)  # fills the help cache
    base = timed([sys.executable, "-c", "pass"])
    helps = timed([BIN / "kit", "--help"], env=env)
    print(f"python -c pass: {base * 1000:.1f} ms; kit --help: {helps * 1000:.1f} ms; ratio {helps / base:.2f}x")
    d = Path(tempfile.mkdtemp())
    (d / "slurm.yaml").write_text(f"executor: slurm\njob_dir: {d}/jobs\naccount: root\npartition: debug\n")
    (d / "p.py").write_text(PIPELINE)
    dry = timed([sys.executable, d / "p.py", "slurm", str(d), "dry"], n=3, env=env, cwd=d)
    print(f"dry run, 800 units (1 array job): {dry:.2f} s")
    if "--slurm" in sys.argv:
        t = time.perf_counter()
        subprocess.run([sys.executable, d / "p.py", "slurm", str(d), "run"], check=True, env=env, cwd=d)
        sub = time.perf_counter() - t
        queued = subprocess.run(["squeue", "-h", "-r", "-n", "gen", "-o", "%i"], capture_output=True, text=True)
        print(f"submit 800 units: {sub:.2f} s to queued; squeue lists {len(queued.stdout.split())} units")
        subprocess.run(["scancel", "-n", "gen"], check=False)


if __name__ == "__main__":
    main()
