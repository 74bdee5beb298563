"""Agreement of kit's grader with other projects' verdicts on cases it was not tuned to (issue 22): for each case of
a JSONL file (`pred`, `gold`, `equivalent`, `source`), kit's verdict as `kit grade` gives it on a record with that
generation and expected answer (extraction in auto mode, or boxed with --extract boxed; then math_grader.grade) and
math-verify's, called directly (`verify(parse(gold), parse(pred))`).

  python perf/bench_grader_heldout.py --cases CASES.jsonl [--misses] [--extract boxed]

The cases themselves are not part of this repository: the held-out sets are built from the test suites of other
projects (Math-Verify and AReaL; open-r1, TRL, slime, rllm, verl, NeMo-RL, OpenRLHF, MindSpeed-RL, Trinity-RFT),
which stay out of the grader's contract so that they keep measuring generalisation (perf/grader_heldout.md says
which files and commits, and how they were counted)."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", required=True, help="JSONL: pred, gold, equivalent, source")
    parser.add_argument("--misses", action="store_true", help="print every case kit decides otherwise")
    parser.add_argument("--extract", default="auto", choices=("auto", "boxed"), help="kit's extraction mode")
    args = parser.parse_args()

    from math_verify import parse, verify

    from pipeline_kit.grading.grade import task_of
    from pipeline_kit.grading.math_grader import grade

    logging.getLogger("math_verify").setLevel(logging.CRITICAL)
    cases = [json.loads(line) for line in Path(args.cases).read_text().splitlines() if line.strip()]
    total, kit_ok, mv_ok = Counter(), Counter(), Counter()
    start = time.monotonic()
    for case in cases:
        source, want = case["source"], case["equivalent"]
        task = task_of({"generation": case["pred"], "expected_answer": case["gold"]}, source, args.extract)
        predicted, kit = task.predicted, grade(task).correct  # as `kit grade` reads a record
        try:
            mv = bool(verify(parse(case["gold"]), parse(case["pred"])))
        except Exception:  # math-verify's own failure counts as its "not equivalent"
            mv = False
        total[source] += 1
        kit_ok[source] += kit == want
        mv_ok[source] += mv == want
        if args.misses and kit != want:
            print(f"MISS {source} {case.get('note', '')}: want {want}, kit {kit} (extracted {predicted!r})")
    print(f"{len(cases)} cases in {time.monotonic() - start:.1f} s")
    print(f"{'source':<28} {'N':>5} {'kit':>14} {'math-verify':>14}")
    for source in sorted(total) + ["TOTAL"]:
        n, k, m = (
            (sum(c.values()) for c in (total, kit_ok, mv_ok))
            if source == "TOTAL"
            else (total[source], kit_ok[source], mv_ok[source])
        )
        print(f"{source:<28} {n:>5} {k:>5} ({100 * k / n:5.1f}%) {m:>5} ({100 * m / n:5.1f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
