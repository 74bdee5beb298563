"""`kit summarize` on a large graded results folder (see perf/README.md, "kit summarize (issue 14)"): wall time of
the whole CLI process (interpreter start, imports, reading every file, the metrics for every k, the tables,
metrics.json), against the 3 s target and against `python -c pass` measured in the same run.

  python perf/bench_summarize.py                      # 64 seeds x 500 problems, 2,000-character generations
  options: --seeds 64 --problems 500 --generation_chars 2000 --benchmarks 1 --rounds 5 [--judge] [--audit] [--foreign]

The folder is written once into a temporary directory (RESULTS/eval-results/bench<i>/output-rs<seed>.jsonl, already
graded: predicted_answer, symbolic_correct, and judge_correct with --judge), then `kit summarize RESULTS` runs
--rounds times in fresh processes; the median and range are printed. --foreign writes another tool's records
instead: no id, num_generated_tokens or generation_time, so the seeds are matched by problem text.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KIT = Path(sys.executable).parent / "kit"
TARGET_S = 3.0


def write_results(
    root: Path, benchmarks: int, seeds: int, problems: int, generation_chars: int, judge: bool, foreign: bool = False
) -> int:
    """The folder; returns its size in bytes."""
    rng = random.Random(14)
    filler = ("Let us compute step by step. " * (generation_chars // 29 + 1))[:generation_chars]
    size = 0
    for b in range(benchmarks):
        folder = root / "eval-results" / f"bench{b}"
        folder.mkdir(parents=True)
        difficulty = [rng.random() for _ in range(problems)]
        for seed in range(seeds):
            lines = []
            for i in range(problems):
                correct = rng.random() > difficulty[i]
                answer = None if rng.random() < 0.05 else str(i if correct else rng.randrange(5))
                rec = {
                    "id": f"problem-{i}",
                    "problem": f"What is {i} + 0?",
                    "expected_answer": str(i),
                    "generation": f"{filler} The answer is \\boxed{{{answer}}}.",
                    "num_generated_tokens": rng.randrange(200, 4000),
                    "generation_time": round(rng.uniform(1, 60), 4),
                    "predicted_answer": answer,
                    "symbolic_correct": answer == str(i),
                }
                if judge:
                    rec["judge_correct"] = (
                        rec["symbolic_correct"] if rng.random() > 0.02 else not rec["symbolic_correct"]
                    )
                if foreign:
                    for key in ("id", "num_generated_tokens", "generation_time"):
                        del rec[key]
                lines.append(json.dumps(rec) + "\n")
            order = list(range(problems))
            rng.shuffle(order)  # seeds are matched by id (or problem), not line order: give each file its own order
            text = "".join(lines[j] for j in order)
            (folder / f"output-rs{seed}.jsonl").write_text(text)
            size += len(text.encode())
    return size


def timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=64)
    parser.add_argument("--problems", type=int, default=500)
    parser.add_argument("--generation_chars", type=int, default=2000)
    parser.add_argument("--benchmarks", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--judge", action="store_true")
    parser.add_argument("--audit", action="store_true")
    parser.add_argument("--foreign", action="store_true", help="records without id and statistics")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-summarize-") as tmp:
        root = Path(tmp) / "results"
        size = write_results(
            root, args.benchmarks, args.seeds, args.problems, args.generation_chars, args.judge, args.foreign
        )
        records = args.benchmarks * args.seeds * args.problems
        print(f"{records} records ({args.benchmarks} x {args.seeds} seeds x {args.problems}), {size / 1e6:.1f} MB")
        cmd = [str(KIT), "summarize", str(root), *(["--audit"] if args.audit else [])]
        timed(cmd)  # warm the page cache and the .pyc files
        baseline, kit = [], []
        for _ in range(args.rounds):
            baseline.append(timed([sys.executable, "-c", "pass"]))
            kit.append(timed(cmd))
        med = statistics.median(kit)
        print(f"python -c pass: median {statistics.median(baseline) * 1000:.1f} ms")
        print(f"kit summarize: median {med:.2f} s (range {min(kit):.2f}-{max(kit):.2f} s over {args.rounds} runs)")
        print(f"ratio to the {TARGET_S:.0f} s target: {med / TARGET_S:.2f} ({'met' if med <= TARGET_S else 'NOT met'})")


if __name__ == "__main__":
    main()
