"""Votes over grader-equivalent answers (pipeline_kit/selection/voting.py), on hand-computed cases."""

from __future__ import annotations

import math

import pytest

from pipeline_kit.selection.voting import Candidate, groups, logprob_weight, majority, weighted


def cands(*answers, weights=None):
    weights = weights or [1.0] * len(answers)
    return [Candidate(i, a, w) for i, (a, w) in enumerate(zip(answers, weights, strict=True))]


def test_equivalent_answers_are_one_vote():
    # 1/2 three ways (3 votes) beats 3 given twice; plain string counting would pick 3
    picked = majority(cands("3", "\\frac{1}{2}", "0.5", "3", "1/2"))
    assert picked.index == 1 and picked.answer == "\\frac{1}{2}"
    assert [[c.index for c in g] for g in groups(cands("3", "\\frac{1}{2}", "0.5", "3", "1/2"))] == [[0, 3], [1, 2, 4]]


def test_a_tie_goes_to_the_earliest_group_and_no_answer_never_wins():
    assert majority(cands(None, "7", "8", "8", "7", None)).index == 1
    assert majority(cands(None, None)) is None


def test_weighted_vote_sums_scores_per_group():
    # group "5" (0.4 + 0.4 + 0.3 = 1.1) beats group "2" (0.9 + 0.1 = 1.0) though "2" has the single best score; the
    # pick is the group's best member, the first 0.4 (ties keep the first)
    picked = weighted(cands("2", "5", "5", "2", "5.0", weights=[0.9, 0.4, 0.4, 0.1, 0.3]))
    assert picked.answer == "5" and picked.index == 1
    # one more "2" at 0.2 makes its group 1.2 > 1.1: now "2" wins, and its best member (0.9) is the pick
    picked = weighted(cands("2", "5", "5", "2", "5.0", "2", weights=[0.9, 0.4, 0.4, 0.1, 0.3, 0.2]))
    assert picked.answer == "2" and picked.index == 0


@pytest.mark.parametrize(("logprobs", "expected"), [([math.log(0.5)] * 4, 0.5), ([], 0.0), ([0.0, 0.0], 1.0)])
def test_logprob_weight_is_the_geometric_mean_probability(logprobs, expected):
    assert logprob_weight(logprobs) == pytest.approx(expected)
