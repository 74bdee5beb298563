"""The arithmetic of `kit summarize`: pass@k, majority@k and pass@1[avg-of-k] over the sampled runs of one
benchmark, and the plain accuracy of a greedy run. All values are percentages (0-100).

A run is one output file (`output.jsonl` or `output-rs{seed}.jsonl`) turned into per-problem lists aligned with
the other runs of its benchmark (output_files.py matches them by `id`, else by problem text, else by line order).
Runs are ordered by seed number; "the first k runs" below means the k lowest seeds.

For every k from 1 to n (n = number of sampled runs) the keys are:
- `pass@1[avg-of-k]`: the accuracy of each of the first k runs, averaged; `<column>_std` is their sample standard
  deviation (n-1 denominator; 0 for k = 1), in percentage points.
- `majority@k`: per problem, the most frequent predicted answer among the first k runs, answers compared as exact
  strings (`0.5` and `1/2` are two answers; selection_modes' `majority[equivalent]@n` and `kit select
  --method=majority` count them as one, with selection/voting.py's equivalent_majority); samples without an answer
  do not vote; a tie goes to the answer that appeared first (lowest seed). The problem counts as correct when the
  first sample that gave that answer is correct. A problem where none of the k samples has an answer is incorrect.
- `pass@k`: the unbiased estimator over all n samples, 1 - C(n-c, k) / C(n, k) with c correct samples, averaged
  over problems: the chance that at least one of k samples drawn without replacement is correct. pass@n is the
  share of problems with any correct sample.

`no_answer` is a share of the same things the row counts, so it is at most 100: samples without an answer among
the first k runs (pass@1[avg-of-k]); problems where none of the first k runs answered (majority@k); the chance that
k samples drawn from the n all lack an answer, C(a, k) / C(n, k) with a unanswered samples (pass@k).
`avg_tokens` and `gen_seconds` are per-sample means of `num_generated_tokens` and `generation_time` over the first
k runs (over all n for pass@k); None where one of those runs lacks the field (files of other tools may)."""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass, field

# the entries of a benchmark in metrics.json that are no evaluation mode: the rows it ran on (summarize.data_of), the
# judge's tally (judge.judge_tally), the thinking statistics (reasoning_stats) and the outputs not finished yet
NON_MODE_KEYS = ("data", "judge", "reasoning", "unfinished")


@dataclass
class Run:
    """One output file, as per-problem lists in the benchmark's problem order."""

    name: str  # the file's name, for messages
    correct: dict[str, list[bool]]  # column (symbolic_correct, judge_correct, ...) -> one bool per problem
    answers: list[Hashable | None]  # predicted answer per problem (None: extraction failed)
    tokens: float | None  # sum of num_generated_tokens over the file; None when a record has none
    seconds: float | None  # sum of generation_time over the file; None when a record has none
    extras: dict[str, list] = field(default_factory=dict)  # per-problem values selection modes use (reward scores)

    @property
    def num_problems(self) -> int:
        return len(self.answers)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability (0-1) that at least one of k samples drawn without replacement from n samples, c of them
    correct, is correct: 1 - C(n-c, k) / C(n, k)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass_at_k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def _all_drawn_from(n: int, a: int, k: int) -> float:
    """Probability (0-1) that k samples drawn from n all come from a given subset of a samples: C(a, k) / C(n, k)."""
    return math.comb(a, k) / math.comb(n, k)


def _mean_std(values: list[float]) -> tuple[float, float]:
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, 0.0
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def _per(total: float | None, count: int) -> float | None:
    return None if total is None else total / count


def greedy_metrics(run: Run, columns: list[str]) -> dict[str, float | None]:
    m = run.num_problems
    out: dict[str, float | None] = {
        "num_entries": m,
        "avg_tokens": _per(run.tokens, m),
        "gen_seconds": _per(run.seconds, m),
    }
    for col in columns:
        out[col] = 100.0 * sum(run.correct[col]) / m
    out["no_answer"] = 100.0 * sum(a is None for a in run.answers) / m
    return out


def sampled_metrics(runs: list[Run], columns: list[str]) -> dict[str, dict[str, float]]:
    """Every key named in the module's docstring, for k = 1..len(runs). The runs must hold the same problems in
    the same order."""
    n = len(runs)
    m = runs[0].num_problems
    if any(r.num_problems != m for r in runs):
        raise ValueError("runs of one benchmark must hold the same problems")
    avg_of: dict[str, dict[str, float]] = {}
    majority_of: dict[str, dict[str, float]] = {}
    pass_of: dict[str, dict[str, float]] = {}

    run_acc = {col: [100.0 * sum(r.correct[col]) / m for r in runs] for col in columns}
    run_unanswered = [sum(a is None for a in r.answers) for r in runs]
    cum_tokens, cum_seconds = _cumulative([r.tokens for r in runs]), _cumulative([r.seconds for r in runs])

    def common(k: int) -> dict[str, float | None]:
        return {"num_entries": m, "avg_tokens": _per(cum_tokens[k], k * m), "gen_seconds": _per(cum_seconds[k], k * m)}

    majority = _exact_majority_counts(runs, columns)
    correct_hist = {
        col: _histogram([sum(t) for t in zip(*(r.correct[col] for r in runs), strict=True)], n) for col in columns
    }
    unanswered_hist = _histogram([sum(a is None for a in t) for t in zip(*(r.answers for r in runs), strict=True)], n)

    for k in range(1, n + 1):
        avg = common(k)
        for col in columns:
            avg[col], avg[f"{col}_std"] = _mean_std(run_acc[col][:k])
        avg["no_answer"] = 100.0 * sum(run_unanswered[:k]) / (k * m)
        avg_of[f"pass@1[avg-of-{k}]"] = avg

        maj = common(k)
        for col in columns:
            maj[col] = 100.0 * majority[col][k] / m
        maj["no_answer"] = 100.0 * majority["no_answer"][k] / m
        majority_of[f"majority@{k}"] = maj

        best = common(n)
        for col in columns:
            best[col] = 100.0 * sum(cnt * pass_at_k(n, c, k) for c, cnt in enumerate(correct_hist[col]) if cnt) / m
        best["no_answer"] = (
            100.0 * sum(cnt * _all_drawn_from(n, a, k) for a, cnt in enumerate(unanswered_hist) if cnt) / m
        )
        pass_of[f"pass@{k}"] = best
    return avg_of | majority_of | pass_of


def _cumulative(values: list[float | None]) -> list[float | None]:
    """[0, v0, v0+v1, ...]: index k holds the sum of the first k values (None from the first None on)."""
    out: list[float | None] = [0.0]
    for v in values:
        out.append(None if v is None or out[-1] is None else out[-1] + v)
    return out


def _histogram(counts: list[int], n: int) -> list[int]:
    hist = [0] * (n + 1)
    for c in counts:
        hist[c] += 1
    return hist


def _exact_majority_counts(runs: list[Run], columns: list[str]) -> dict[str, list[int]]:
    """For each column, list index k (1..n): the number of problems whose majority answer over the first k runs is
    correct; under "no_answer", the number of problems where none of the first k runs has an answer.

    The vote is kept incrementally: adding run k changes one answer's count only, so the leader either stays or
    becomes that answer (on a tie, the answer first seen in an earlier run wins)."""
    n = len(runs)
    result = {col: [0] * (n + 1) for col in [*columns, "no_answer"]}
    correct_lists = [[r.correct[col] for col in columns] for r in runs]
    for i in range(runs[0].num_problems):
        counts: dict[Hashable, int] = {}
        first_seen: dict[Hashable, int] = {}  # answer -> index of the first run that gave it
        leader = None
        for j, run in enumerate(runs):
            answer = run.answers[i]
            if answer is not None:
                count = counts.get(answer, 0) + 1
                counts[answer] = count
                if count == 1:
                    first_seen[answer] = j
                if (
                    leader is None
                    or count > counts[leader]
                    or (count == counts[leader] and first_seen[answer] < first_seen[leader])
                ):
                    leader = answer
            k = j + 1
            if leader is None:
                result["no_answer"][k] += 1
                continue
            source = correct_lists[first_seen[leader]]
            for c, col in enumerate(columns):
                if source[c][i]:
                    result[col][k] += 1
    return result
