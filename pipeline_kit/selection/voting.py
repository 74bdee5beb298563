"""Votes over one problem's candidate answers, where answers the math grader finds equal count as one answer
(`\\frac{1}{2}`, `0.5` and `1/2` are one vote of three). A candidate without an answer never wins.

- equivalent_majority: the largest group; a tie goes to the group whose first member came first. It is `kit select
  --method=majority` and summarize's `majority[equivalent]@n`; summarize's `majority@k` votes on exact answer
  strings instead (evaluation/metrics.py), which needs no grader and so is computed for every k.
- weighted: the group with the largest total weight; a weight is a reward model's score (summed as given, so use a
  scorer whose scores are not negative, e.g. a probability) or exp(mean log-probability) of the solution's tokens.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from pipeline_kit.grading.math_grader import Task, grade

SameAnswer = Callable[[str, str], bool]


@dataclass(frozen=True)
class Candidate:
    """One sampled solution's answer; `index` is its sample (seed) number, `weight` its score for a weighted vote."""

    index: int
    answer: str | None
    weight: float = 1.0


def grader_equal(a: str, b: str) -> bool:
    """The grader's verdict in both directions (its rules are written for predicted vs expected)."""
    return a == b or (grade(Task(a, b)).correct and grade(Task(b, a)).correct)


def groups(candidates: list[Candidate], same: SameAnswer = grader_equal) -> list[list[Candidate]]:
    """The answered candidates in groups of equal answers, in order of first appearance; each candidate joins the
    first group whose first member's answer equals its own."""
    out: list[list[Candidate]] = []
    for candidate in candidates:
        if candidate.answer is None:
            continue
        home = next((g for g in out if same(g[0].answer, candidate.answer)), None)
        if home is None:
            out.append([candidate])
        else:
            home.append(candidate)
    return out


@dataclass(frozen=True)
class Choice:
    """The chosen candidate and `votes`: how many candidates gave an answer equal to its answer."""

    candidate: Candidate
    votes: int


def equivalent_majority(candidates: list[Candidate], same: SameAnswer = grader_equal) -> Choice | None:
    """The first member of the largest group (None when no candidate has an answer)."""
    found = groups(candidates, same)
    if not found:
        return None
    best = max(found, key=len)  # max keeps the first of equals: the earliest group
    return Choice(best[0], len(best))


def weighted(candidates: list[Candidate], same: SameAnswer = grader_equal) -> Choice | None:
    """The highest-weighted member of the group with the largest total weight."""
    found = groups(candidates, same)
    if not found:
        return None
    best = max(found, key=lambda g: sum(c.weight for c in g))
    return Choice(max(best, key=lambda c: c.weight), len(best))


def sc_tir_keeps(sample: dict) -> bool:
    """SC-TIR's filter: a TIR sample whose last code round ended in an error or a timeout, or that used up its code
    executions, does not vote (`code_last_status`, `code_limit_reached`: what kit's TIR writes per sample)."""
    return sample["code_last_status"] not in ("error", "timeout") and not sample["code_limit_reached"]


def logprob_weight(token_logprobs: list[float]) -> float:
    """exp(mean log-probability): the geometric mean of the tokens' probabilities, in (0, 1]."""
    return math.exp(sum(token_logprobs) / len(token_logprobs)) if token_logprobs else 0.0


MEAN_LOGPROB = "mean_logprob"  # what kit generate ++inference.logprobs=true writes per sample


def vote_weight(field: str, value: float) -> float:
    """A sample's weight from its `field`: a mean log-probability becomes exp(it) (a probability, so weights add
    up sensibly); any other score (a reward model's) is used as given."""
    return math.exp(value) if field == MEAN_LOGPROB else float(value)
