"""In-process cost of extraction and the grader's string rules per record, for comparing checkouts where
bench_grading.py's pool and start-up make the spread larger than the difference: 1,000 MATH-500 records (each
expected answer boxed, and a sentence ending in a random answer's `$…$`), `extract_answer` then `quick_verdict`
(no sympy), process time, best of --reps; each checkout in its own interpreter, alternating --rounds times.

  python perf/bench_string_rules.py [--rounds 3] [--reps 15] CHECKOUT [CHECKOUT ...]"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
from pathlib import Path

MATH500 = Path(__file__).resolve().parent.parent / "tests" / "data" / "benchmarks" / "math500" / "test.jsonl"


def measure(checkout: str, reps: int) -> float:
    """Best per-record microseconds of `reps` passes with `checkout`'s grader (run in a child interpreter)."""
    sys.path.insert(0, checkout)
    from pipeline_kit.grading.extraction import extract_answer
    from pipeline_kit.grading.math_grader import Task, quick_verdict

    golds = [json.loads(line)["expected_answer"] for line in MATH500.read_text().splitlines() if line.strip()]
    rng = random.Random(0)
    records = [(f"So the answer is $\\boxed{{{g}}}$.", g) for g in golds]
    records += [(f"We compute it. The result is ${rng.choice(golds)}$.", g) for g in golds]
    best = float("inf")
    for _ in range(reps):
        start = time.process_time()
        for generation, expected in records:
            quick_verdict(Task(extract_answer(generation), expected))
        best = min(best, time.process_time() - start)
    return best * 1e6 / len(records)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkouts", nargs="+", help="source trees (git worktree or git archive) to compare")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--one", help=argparse.SUPPRESS)  # the child's side: measure this checkout and print
    args = parser.parse_args()
    if args.one:
        print(f"{measure(args.one, args.reps):.1f}")
        return 0
    for round_ in range(args.rounds):
        cells = []
        for checkout in args.checkouts:
            cmd = [sys.executable, __file__, "--one", checkout, "--reps", str(args.reps), checkout]
            cells.append(
                f"{checkout}: {subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()} us"
            )
        print(f"round {round_ + 1}: " + ", ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
