"""Grading speed (issue 14): answers per second on MATH-500-style answers, math-verify called directly in one process
against kit's grader (string rules, numeric reading and cache in the parent; math-verify in a pool of 2 worker
processes), on the same pairs.

  python perf/bench_grading.py [--samples 8] [--workers 2] [--seed 0]

Pairs: each of the 500 MATH-500 problems gets --samples generations ("... so $\\boxed{X}$."), X drawn from the
expected answer as written (45%), an equivalent rewrite of it (20%: \\dfrac, no spaces, 5.0 for 5, a \\text{}
unit) and a wrong one (35%: a digit changed; another letter or word for choice and word answers; else +1); as in
a sampled eval, the same answer comes back for the same problem. Measured: (1) math-verify direct:
parse(generation) and parse($expected$), verify, per pair, one process, its own timeouts; (2) kit's grader in
this process: extract_answer + grade_tasks(workers=2), cache empty at the start, pool start included; (3) the
same again (every pair cached); (4) `python -m pipeline_kit.grading.grade FILE --workers 2` on the pairs as a
result file: interpreter, reading, writing; (5) math-verify and kit's grader (cache emptied) on the distinct pairs
only, without repeats. The verdicts of (1) and (2) are compared; each disagreement is printed."""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MATH500 = Path(__file__).resolve().parent.parent / "tests" / "data" / "benchmarks" / "math500" / "test.jsonl"


def equivalent_form(answer: str) -> str:
    """A rewrite a model might produce that states the same answer."""
    if re.fullmatch(r"-?\d+", answer):
        return answer + ".0"
    if "\\frac" in answer:
        return answer.replace("\\frac", "\\dfrac")
    if " " in answer:
        return answer.replace(" ", "")
    return answer + "\\text{ units}" if re.fullmatch(r"[-\d.\\{}a-z]+", answer) else "{" + answer + "}"


def wrong_form(answer: str) -> str:
    """A wrong answer of the same kind: another choice letter, another word, or one digit changed (+1 without)."""
    letter = re.fullmatch(r"\\text\{\(([A-E])\)\}", answer)
    if letter:
        return f"\\text{{({'ABCDEA'['ABCDE'.index(letter.group(1)) + 1]})}}"
    if re.fullmatch(r"\\text\{[A-Za-z ]+\}", answer):
        return "\\text{none}"
    digits = [m.start() for m in re.finditer(r"\d", answer)]
    if not digits:
        return answer + "+1"
    i = digits[-1]
    return answer[:i] + str((int(answer[i]) + 1) % 10) + answer[i + 1 :]


def build_pairs(samples: int, seed: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    pairs = []
    for line in MATH500.read_text().splitlines():
        expected = json.loads(line)["expected_answer"]
        forms = [expected, equivalent_form(expected), wrong_form(expected)]
        for _ in range(samples):
            answer = rng.choices(forms, weights=[45, 20, 35])[0]
            pairs.append((f"Let me work through it step by step ... so the answer is $\\boxed{{{answer}}}$.", expected))
    return pairs


def direct(pairs: list[tuple[str, str]]) -> tuple[float, list[bool]]:
    from math_verify import parse, verify

    parse("$1$")  # import and regex building outside the timing
    start = time.perf_counter()
    verdicts = [bool(verify(parse(f"${expected}$"), parse(generation))) for generation, expected in pairs]
    return time.perf_counter() - start, verdicts


def kit(pairs: list[tuple[str, str]], workers: int) -> tuple[float, list[bool], int]:
    from pipeline_kit.grading import grader_pool
    from pipeline_kit.grading.extraction import extract_answer
    from pipeline_kit.grading.math_grader import Task, quick_verdict

    start = time.perf_counter()
    tasks = [Task(extract_answer(generation), expected) for generation, expected in pairs]
    verdicts = grader_pool.grade_tasks(tasks, workers=workers)
    elapsed = time.perf_counter() - start
    to_sympy = sum(quick_verdict(t) is None for t in dict.fromkeys(tasks))
    return elapsed, [v.correct for v in verdicts], to_sympy


def end_to_end(pairs: list[tuple[str, str]], workers: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "output-rs0.jsonl"
        path.write_text(
            "".join(
                json.dumps({"id": i, "generation": g, "expected_answer": e}) + "\n" for i, (g, e) in enumerate(pairs)
            )
        )
        argv = [sys.executable, "-m", "pipeline_kit.grading.grade", str(path), "--workers", str(workers)]
        start = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True)
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=8, help="generations per problem")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    pairs = build_pairs(args.samples, args.seed)
    unique = len(set(pairs))
    print(f"{len(pairs)} pairs, {unique} distinct ({len(pairs) / unique:.1f}x repeats)")

    from pipeline_kit.grading import grader_pool

    distinct = list(dict.fromkeys(pairs))
    kit_cold, kit_verdicts, to_sympy = kit(pairs, args.workers)
    kit_warm, _, _ = kit(pairs, args.workers)
    grader_pool._cache.clear()
    kit_distinct, _, _ = kit(distinct, args.workers)
    e2e = end_to_end(pairs, args.workers)
    mv_time, mv_verdicts = direct(pairs)
    mv_distinct, _ = direct(distinct)
    n, d = len(pairs), len(distinct)
    print(f"math-verify direct, 1 process:        {mv_time:7.2f} s  {n / mv_time:8.0f} answers/s")
    print(
        f"kit grader, pool of {args.workers} + cache (cold): {kit_cold:7.2f} s  {n / kit_cold:8.0f} answers/s  "
        f"({unique - to_sympy} distinct pairs decided by string rules, {to_sympy} by math-verify)"
    )
    print(f"kit grader, every pair cached:        {kit_warm:7.2f} s  {n / kit_warm:8.0f} answers/s")
    print(f"python -m ...grade FILE (end to end): {e2e:7.2f} s  {n / e2e:8.0f} answers/s")
    print(f"distinct pairs only ({d}, no repeats): math-verify {d / mv_distinct:.0f}/s, kit {d / kit_distinct:.0f}/s")
    print(f"speed-up (cold) over math-verify direct: {mv_time / kit_cold:.1f}x")
    differ = [(p, m, k) for p, m, k in zip(pairs, mv_verdicts, kit_verdicts, strict=True) if m != k]
    print(
        f"verdicts: kit {sum(kit_verdicts)} correct, math-verify {sum(mv_verdicts)} correct, "
        f"{len(differ)} pairs differ ({len({d[0] for d in differ})} distinct)"
    )
    for (generation, expected), m, k in dict.fromkeys(differ):
        answer = generation.split("\\boxed{", 1)[1][:-3]
        print(f"  expected {expected!r}  predicted {answer!r}: math-verify {m}, kit {k}")


if __name__ == "__main__":
    main()
