"""CPU seconds (user + system) of whole `kit` processes that render a job: `kit generate --dry_run` of one job on a
none cluster, and `kit run_cmd --dry_run`, for one or more source trees of kit, interleaved round by round (see
perf/README.md, "CPU per kit command"). CPU rather than wall time: the test suite runs ~600 kit commands on 2
cores, so what each one burns is what the suite waits for.

  python perf/bench_kit_cpu.py [--rounds 10] [--tree /path/to/other/checkout ...]

Without --tree it measures the installed kit; each --tree is put first on PYTHONPATH (a worktree of another commit).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import bytecode_cache  # perf/: .pyc files as a user has them


def cpu_of(argv: list[str], cwd: Path, env: dict) -> float:
    """User + system CPU seconds of one child process (and anything it waited for)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:4])} failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def user_repo(root: Path) -> Path:
    """A committed git repository with an input file and a none cluster config, as a user's project."""
    repo = root / "project"
    (repo / "configs").mkdir(parents=True)
    (repo / "configs" / "local.yaml").write_text(f"executor: none\njob_dir: {root / 'jobs'}\n")
    (repo / "in.jsonl").write_text('{"problem": "What is 1+1?", "expected_answer": "2"}\n')
    for step in (["init", "-q"], ["add", "-A"], ["-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "p"]):
        subprocess.run(["git", *step], cwd=repo, check=True)
    return repo


def main() -> None:
    bytecode_cache.enable()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--tree", action="append", default=[], help="A kit checkout to measure (PYTHONPATH first).")
    args = ap.parse_args()
    trees = args.tree or [""]
    common = ["--cluster=local", "--config_dir=configs", "--dry_run"]
    cases = {
        "generate --dry_run": [
            "generate",
            *common,
            "--server_type=openai",
            "--server_address=http://127.0.0.1:9/v1",
            "--model=m",
            "--input_file=in.jsonl",
            "--output_dir=/tmp/kit-bench-out",
        ],
        "run_cmd --dry_run": ["run_cmd", *common, "--command=echo hi"],
        "python -c pass": None,
    }
    with tempfile.TemporaryDirectory() as tmp:
        repo = user_repo(Path(tmp))
        samples: dict[tuple[str, str], list[float]] = {}
        for _ in range(args.rounds):
            for tree in trees:
                env = {**os.environ, "KIT_HOME": str(Path(tmp) / "kit-home")}
                if tree:
                    env["PYTHONPATH"] = os.pathsep.join(filter(None, [tree, os.environ.get("PYTHONPATH")]))
                for name, kit_args in cases.items():
                    argv = [sys.executable, "-m", "pipeline_kit.cli.main", *kit_args] if kit_args else [
                        sys.executable, "-c", "pass"]  # fmt: skip
                    samples.setdefault((tree or "installed", name), []).append(cpu_of(argv, repo, env))
    print(f"{'tree':<40} {'case':<22} median CPU s (min-max) over {args.rounds} rounds")
    for (tree, name), values in samples.items():
        print(f"{tree:<40} {name:<22} {statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})")


if __name__ == "__main__":
    main()
