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
    assert picked.candidate.index == 1 and picked.candidate.answer == "\\frac{1}{2}" and picked.votes == 3
    assert [[c.index for c in g] for g in groups(cands("3", "\\frac{1}{2}", "0.5", "3", "1/2"))] == [[0, 3], [1, 2, 4]]


def test_a_tie_goes_to_the_earliest_group_and_no_answer_never_wins():
    assert majority(cands(None, "7", "8", "8", "7", None)).candidate.index == 1
    assert majority(cands(None, None)) is None


def test_weighted_vote_sums_scores_per_group():
    # group "5" (0.4 + 0.4 + 0.3 = 1.1) beats group "2" (0.9 + 0.1 = 1.0) though "2" has the single best score; the
    # pick is the group's best member, the first 0.4 (ties keep the first)
    picked = weighted(cands("2", "5", "5", "2", "5.0", weights=[0.9, 0.4, 0.4, 0.1, 0.3]))
    assert picked.candidate.answer == "5" and picked.candidate.index == 1 and picked.votes == 3
    # one more "2" at 0.2 makes its group 1.2 > 1.1: now "2" wins, and its best member (0.9) is the pick
    picked = weighted(cands("2", "5", "5", "2", "5.0", "2", weights=[0.9, 0.4, 0.4, 0.1, 0.3, 0.2]))
    assert picked.candidate.answer == "2" and picked.candidate.index == 0 and picked.votes == 3


@pytest.mark.parametrize(("logprobs", "expected"), [([math.log(0.5)] * 4, 0.5), ([], 0.0), ([0.0, 0.0], 1.0)])
def test_logprob_weight_is_the_geometric_mean_probability(logprobs, expected):
    assert logprob_weight(logprobs) == pytest.approx(expected)


# ---- kit select over a constructed results folder


def write_runs(folder, runs):
    """runs: per seed, per problem (generation, reward); expected answers: p0 -> 1/2, p1 -> 7, p2 -> 4."""
    import json

    expected = {"p0": "\\frac{1}{2}", "p1": "7", "p2": "4"}
    folder.mkdir(parents=True)
    for seed, answers in enumerate(runs):
        with (folder / f"output-rs{seed}.jsonl").open("w") as f:
            for (pid, exp), (gen, reward) in zip(expected.items(), answers, strict=True):
                record = {"id": pid, "problem": f"q {pid}", "expected_answer": exp, "generation": gen, "rm": reward}
                f.write(json.dumps(record) + "\n")


RUNS = [  # seed 0, 1, 2
    [("\\boxed{0.5}", 0.2), ("\\boxed{8}", 0.9), ("no answer", 0.1)],
    [("\\boxed{3}", 0.9), ("\\boxed{7}", 0.3), ("\\boxed{5}", 0.2)],
    [("\\boxed{1/2}", 0.1), ("\\boxed{7.0}", 0.4), ("\\boxed{4}", 0.3)],
]


@pytest.mark.parametrize(
    ("method", "picks", "line"),
    [
        # p0: {0.5, 1/2} (2) beats {3}; p1: {7, 7.0} (2) beats {8}; p2: 5 and 4 tie at 1, the earlier (seed 1: 5) wins
        ("majority", {"p0": (0, 2), "p1": (1, 2), "p2": (1, 1)}, "3 problems, 66.67% correct, 0 without an answer"),
        # p0: {0.5, 1/2} 0.3 < {3} 0.9 -> 3; p1: {7, 7.0} 0.7 < {8} 0.9 -> 8; p2: {4} 0.3 > {5} 0.2 -> 4
        ("weighted", {"p0": (1, 1), "p1": (0, 1), "p2": (2, 1)}, "3 problems, 33.33% correct, 0 without an answer"),
    ],
)
def test_kit_select_picks_the_hand_computed_records(kit, tmp_path, method, picks, line):
    import json

    write_runs(tmp_path / "aime", RUNS)  # ungraded: kit select grades them in place first
    out = tmp_path / "selected.jsonl"
    res = kit("select", f"--input_dir={tmp_path / 'aime'}", f"--method={method}", f"--output_file={out}",
              *(["--weight_field=rm"] if method == "weighted" else []))  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert f"{method} over 3 runs: {line}" in res.stdout, res.stdout
    chosen = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    for pid, (seed, votes) in picks.items():
        assert chosen[pid]["generation"] == RUNS[seed][int(pid[1])][0], (pid, chosen[pid])
        assert chosen[pid]["selection"] == {"method": method, "votes": votes, "candidates": 3}


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--method=weighted"], "--method=weighted needs --weight_field"),
        (["--method=weighted", "--weight_field=score"], "output-rs0.jsonl:1: no number in 'score'"),
        (["--method=vote"], "--method=vote is not one of majority, weighted, genselect."),
    ],
)
def test_kit_select_bad_input_is_one_line(kit, tmp_path, args, needle):
    write_runs(tmp_path / "aime", RUNS)
    res = kit("select", f"--input_dir={tmp_path / 'aime'}", f"--output_file={tmp_path / 'o.jsonl'}", *args)
    assert res.returncode == 2 and needle in res.stderr and res.stderr.count("\n") == 1, res.stderr
    assert not (tmp_path / "o.jsonl").exists()
