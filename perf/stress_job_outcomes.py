"""Stress the job script's outcome under CPU load: a failing command must end FAILED with its own cause line in
kit's report, and a succeeding one SUCCEEDED, every time (the job script once read a failure as success when bash's
`wait -n` lost a child, and read the cause before the log's writer had written it).

Each run is two jobs, submitted through the Python API (what `kit run_cmd` builds): `fail<run>` echoes
`RuntimeError: boom <run>` and exits 3, `pass<run>` echoes a line and exits 0. `--per_experiment` runs make one
experiment, whose jobs run at once. While the runs go, `--hogs` busy loops keep the cores loaded (each stops by
itself after `--hog_limit_s`).

    python perf/stress_job_outcomes.py --runs 200 --hogs 4                      # executor none
    python perf/stress_job_outcomes.py --runs 50 --hogs 4 --slurm_partition debug   # the local Slurm ($SLURM_CONF)

Prints one line per run that went wrong and a closing line with the counts; exit 1 if any run went wrong.
tests/test_job_outcomes.py runs a 20-run version with 4 hogs.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HOG = "import time, sys\nend = time.time() + float(sys.argv[1])\nwhile time.time() < end:\n    pass\n"


def start_hogs(count: int, limit_s: float) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", HOG, str(limit_s)]) for _ in range(count)]


def make_repo(root: Path) -> Path:
    """A committed git repo for kit to package (jobs run committed code only)."""
    repo = root / "proj"
    repo.mkdir()
    (repo / "README").write_text("stress\n")
    git = ["git", "-c", "user.email=s@s", "-c", "user.name=s", "-C", str(repo)]
    for args in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "init"]):
        subprocess.run([*git, *args], check=True)
    return repo


def cluster_yaml(root: Path, partition: str | None) -> Path:
    text = f"executor: none\njob_dir: {root / 'jobs'}\n"
    if partition:
        text = f"executor: slurm\njob_dir: {root / 'jobs'}\naccount: root\npartition: {partition}\n"
    path = root / "stress.yaml"
    path.write_text(text)
    return path


def check_run(run: int, states: dict[str, str], reasons: dict[str, str]) -> list[str]:
    """What went wrong in one run (empty: both jobs ended as their commands did, the failure with its cause)."""
    wrong = []
    fail, ok = f"fail{run}", f"pass{run}"
    if states.get(fail) != "FAILED":
        wrong.append(f"run {run}: the failing command ended {states.get(fail)}, not FAILED")
    elif f"{fail}.log: RuntimeError: boom {run}" not in reasons[fail] or "exit code 3" not in reasons[fail]:
        wrong.append(f"run {run}: FAILED without its cause line: {reasons[fail]!r}")
    if states.get(ok) != "SUCCEEDED":
        wrong.append(f"run {run}: the succeeding command ended {states.get(ok)}, not SUCCEEDED")
    return wrong


def run_jobs(run: int) -> list:
    from pipeline_kit.pipeline import Command, CommandGroup, Job  # lazy: imported once the caller's path is set

    fail = Command(f"echo 'RuntimeError: boom {run}'; exit 3", name=f"fail{run}")
    ok = Command(f"echo 'all good {run}'", name=f"pass{run}")
    return [Job(f"fail{run}", [CommandGroup([fail])]), Job(f"pass{run}", [CommandGroup([ok])])]


def stress(runs: int, hogs: int, partition: str | None, per_experiment: int, hog_limit_s: float) -> list[str]:
    """Run `runs` failing and `runs` succeeding commands, `per_experiment` of each in one experiment (its jobs run
    at once); returns what went wrong."""
    from pipeline_kit.cluster import load_cluster_config  # lazy: the package's own path may come from PYTHONPATH
    from pipeline_kit.launch import run_pipeline
    from pipeline_kit.pipeline import Pipeline

    root = Path(tempfile.mkdtemp(prefix="kit-stress-"))
    repo = make_repo(root)
    cluster = load_cluster_config(str(cluster_yaml(root, partition)))
    wrong: list[str] = []
    hog_procs = start_hogs(hogs, hog_limit_s)
    try:
        for first in range(0, runs, per_experiment):
            batch = range(first, min(first + per_experiment, runs))
            jobs = [job for run in batch for job in run_jobs(run)]
            experiment = run_pipeline(Pipeline(f"stress{first}", cluster, jobs, cwd=str(repo)))
            states = experiment.wait(timeout=600)
            reasons = {f.job: f.reason for f in experiment.failures()}
            for run in batch:
                wrong += check_run(run, states, reasons)
            print(f"{batch[-1] + 1}/{runs} runs, {len(wrong)} wrong", file=sys.stderr, flush=True)
    finally:
        for proc in hog_procs:
            proc.kill()
    return wrong


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--hogs", type=int, default=4, help="busy loops beside the runs")
    parser.add_argument("--hog_limit_s", type=float, default=1800, help="each hog stops by itself after this")
    parser.add_argument("--slurm_partition", default=None, help="run on the Slurm of $SLURM_CONF, in this partition")
    parser.add_argument("--per_experiment", type=int, default=10, help="runs (job pairs) in one experiment")
    args = parser.parse_args(argv)
    start = time.monotonic()
    wrong = stress(args.runs, args.hogs, args.slurm_partition, args.per_experiment, args.hog_limit_s)
    for line in wrong:
        print(line)
    where = f"slurm partition {args.slurm_partition}" if args.slurm_partition else "executor none"
    print(
        f"{args.runs} runs on {where} with {args.hogs} hogs in {time.monotonic() - start:.0f} s: "
        f"{args.runs - len({w.split(':')[0] for w in wrong})} right, {len(wrong)} wrong "
        f"(load {os.getloadavg()[0]:.1f})"
    )
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
