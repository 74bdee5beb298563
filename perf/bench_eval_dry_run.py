"""`kit eval --dry_run` for `math:16,aime24:16` with 10 chunks each on a Slurm cluster config (320 units: two arrays
of 160 elements, plus the summarize job), wall time of the whole CLI process against the 3 s target, beside
`kit --help` and `kit generate --dry_run` of one 160-unit array measured in the same run (see perf/README.md,
"kit eval --dry_run (issue 14)").

  python perf/bench_eval_dry_run.py [--rounds 5]

Nothing is submitted and no Slurm is needed: the config names `max_array_size`, so kit does not ask scontrol.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import bytecode_cache  # perf/: .pyc files as a user has them

KIT = Path(sys.executable).parent / "kit"
TARGET_S = 3.0


def timed(argv: list[str], cwd: Path, env: dict) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:3])} failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    return elapsed


def main() -> None:
    bytecode_cache.enable()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    import os

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        repo = root / "proj"
        repo.mkdir()
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        (repo / "a.py").write_text("print(1)\n")
        git = ["git", "-c", "user.email=b@b", "-c", "user.name=b", "-C", str(repo)]
        subprocess.run([*git, "add", "."], check=True)
        subprocess.run([*git, "commit", "-q", "-m", "init"], check=True)
        (root / "slurm.yaml").write_text(
            f"executor: slurm\njob_dir: {root / 'jobs'}\naccount: acct\npartition: batch\nmax_array_size: 1001\n"
        )
        env = {**os.environ, "KIT_HOME": str(root / "home")}
        cluster = ["--cluster=slurm", f"--config_dir={root}", "--dry_run"]
        server = ["--server_type=vllm", "--server_gpus=8", "--model=/models/qwen"]
        cases = {
            "kit --help": [str(KIT), "--help"],
            "generate --dry_run (160 units)": [
                str(KIT), "generate", *cluster, *server, "--input_file=/data/math.jsonl", "--output_dir=/out",
                "--num_chunks=10", "--num_random_seeds=16",
            ],
            "eval --dry_run (math:16,aime24:16 x 10 chunks)": [
                str(KIT), "eval", *cluster, *server, "--benchmarks=math:16,aime24:16", "--num_chunks=10",
                "--data_dir=/data", "--output_dir=/results",
            ],
        }  # fmt: skip
        times: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(args.rounds):
            for name, argv in cases.items():  # interleaved, so load changes hit every case alike
                times[name].append(timed(argv, repo, env))
    base = statistics.median(times["kit --help"])
    print(f"{'case':48} {'median s':>9} {'min-max s':>13} {'/ --help':>9} {'/ 3 s':>7}")
    for name, values in times.items():
        med = statistics.median(values)
        print(f"{name:48} {med:9.2f} {min(values):6.2f}-{max(values):<6.2f} {med / base:9.2f} {med / TARGET_S:7.2f}")


if __name__ == "__main__":
    main()
