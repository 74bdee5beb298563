"""Votes over grader-equivalent answers (pipeline_kit/selection/voting.py), on hand-computed cases."""

from __future__ import annotations

import json
import math

import pytest

from pipeline_kit.selection.voting import Candidate, equivalent_majority, groups, logprob_weight, weighted


def cands(*answers, weights=None):
    weights = weights or [1.0] * len(answers)
    return [Candidate(i, a, w) for i, (a, w) in enumerate(zip(answers, weights, strict=True))]


def test_equivalent_answers_are_one_vote():
    # 1/2 three ways (3 votes) beats 3 given twice; plain string counting would pick 3
    picked = equivalent_majority(cands("3", "\\frac{1}{2}", "0.5", "3", "1/2"))
    assert picked.candidate.index == 1 and picked.candidate.answer == "\\frac{1}{2}" and picked.votes == 3
    assert [[c.index for c in g] for g in groups(cands("3", "\\frac{1}{2}", "0.5", "3", "1/2"))] == [[0, 3], [1, 2, 4]]


def test_a_tie_goes_to_the_earliest_group_and_no_answer_never_wins():
    assert equivalent_majority(cands(None, "7", "8", "8", "7", None)).candidate.index == 1
    assert equivalent_majority(cands(None, None)) is None


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
        (["--method=vote"], "--method=vote is not one of majority, weighted, sc-tir, genselect."),
    ],
)
def test_kit_select_bad_input_is_one_line(kit, tmp_path, args, needle):
    write_runs(tmp_path / "aime", RUNS)
    res = kit("select", f"--input_dir={tmp_path / 'aime'}", f"--output_file={tmp_path / 'o.jsonl'}", *args)
    assert res.returncode == 2 and needle in res.stderr and res.stderr.count("\n") == 1, res.stderr
    assert not (tmp_path / "o.jsonl").exists()


# ---- the selection modes of `kit summarize`, on a constructed folder worked out by hand
#        rs0                       rs1                          rs2
#   q1  6   ok  1.5 completed      7  x  0.9 error              7  x 0.1 completed       expected 6
#   q2  1   x   0.95 limit reached 0.5 ok 0.5 completed         \frac{1}{2} ok 0.4 completed   expected 1/2
#   q3  2   x   0.1 timeout        3  ok 0.8 completed          2  x 0.3 completed       expected 3
# majority@3 (exact strings): q1 7, q2 a three-way tie -> 1, q3 2: 0 of 3.
# majority[equivalent]@3: q2's 0.5 and \frac{1}{2} are one answer (2 votes): 1 of 3.
# weighted[reward_model_score]@3: q1 6 (1.5) beats 7 (0.9 + 0.1); q2 1 (0.95) beats 1/2 (0.9); q3 3 (0.8) beats
#   2 (0.1 + 0.3): 2 of 3.
# sc-tir@3: dropping error / timeout / limit-reached samples leaves q1 6 vs 7 (tie, 6 first), q2 1/2 twice,
#   q3 3 vs 2 (tie, 3 first): 3 of 3.
SCORED = [
    [("q1", "6", True, 1.5, "completed", False), ("q2", "1", False, 0.95, "completed", True),
     ("q3", "2", False, 0.1, "timeout", False)],
    [("q1", "7", False, 0.9, "error", False), ("q2", "0.5", True, 0.5, "completed", False),
     ("q3", "3", True, 0.8, "completed", False)],
    [("q1", "7", False, 0.1, "completed", False), ("q2", "\\frac{1}{2}", True, 0.4, "completed", False),
     ("q3", "2", False, 0.3, "completed", False)],
]  # fmt: skip
EXPECTED = {"q1": "6", "q2": "\\frac{1}{2}", "q3": "3"}
# mean log-probabilities; weights exp(.): q1 7 (0.905 + 0.905) beats 6 (0.135); q2 1/2 (0.607 + 0.607) beats 1
# (0.951); q3 2 (0.741 + 0.741) beats 3 (0.819): weighted[mean_logprob]@3 is 1 of 3
LOGPROBS = [{"q1": -2.0, "q2": -0.05, "q3": -0.3}, {"q1": -0.1, "q2": -0.5, "q3": -0.2},
            {"q1": -0.1, "q2": -0.5, "q3": -0.3}]  # fmt: skip


def write_scored(bench):
    bench.mkdir()
    for seed, rows in enumerate(SCORED):
        records = [
            {"id": pid, "expected_answer": EXPECTED[pid], "generation": f"\\boxed{{{answer}}}", "predicted_answer": answer,
             "symbolic_correct": ok, "num_generated_tokens": 10, "generation_time": 0.1, "reward_model_score": score,
             "code_rounds_executed": 1, "code_last_status": status, "code_limit_reached": limit,
             "mean_logprob": LOGPROBS[seed][pid]}
            for pid, answer, ok, score, status, limit in rows
        ]  # fmt: skip
        (bench / f"output-rs{seed}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return bench


def test_kit_select_sc_tir_drops_failed_traces_then_votes(kit, tmp_path):
    bench = write_scored(tmp_path / "toy")
    res = kit("select", f"--input_dir={bench}", "--method=sc-tir", f"--output_file={tmp_path / 's.jsonl'}")
    assert res.returncode == 0 and "sc-tir over 3 runs: 3 problems, 100.00% correct" in res.stdout, res.stderr
    chosen = [json.loads(line) for line in (tmp_path / "s.jsonl").read_text().splitlines()]
    # q1: 6 (rs0) vs 7 (rs2), a tie the earlier wins; q2: 0.5 and \frac{1}{2} (2 votes); q3: 3 (rs1) vs 2 (rs2)
    assert [(r["predicted_answer"], r["selection"]["votes"]) for r in chosen] == [("6", 1), ("0.5", 2), ("3", 1)]
    plain = tmp_path / "plain"
    plain.mkdir()
    for i in range(2):
        (plain / f"output-rs{i}.jsonl").write_text(
            json.dumps({"id": 1, "expected_answer": "1", "generation": "1"}) + "\n"
        )
    res = kit("select", f"--input_dir={plain}", "--method=sc-tir", f"--output_file={tmp_path / 'p.jsonl'}")
    assert (
        res.returncode == 2 and "no code_last_status; --method=sc-tir needs runs made with code execution" in res.stderr
    )


def test_summarize_reports_each_selection_method_as_a_mode(tmp_path, capsys):
    from pipeline_kit.cli.main import main

    bench = write_scored(tmp_path / "toy")
    # GenSelect's picks (as `kit generate --genselect` writes them): q1 from rs0 (6: ok), q2 from rs0 (1: x), q3 from
    # rs1 (3: ok): 2 of 3; a second shuffle picked q2 from rs1 (ok) too: 3 of 3; genselect@3 is their mean, 83.33
    picks = bench / "genselect"
    picks.mkdir()
    for name, runs in (("output-rs0.jsonl", (0, 0, 1)), ("output-rs1.jsonl", (0, 1, 1))):
        how = ("judgment", "fallback" if name == "output-rs0.jsonl" else "judgment", "unanimous")
        records = [{"id": pid, "genselect": {"chosen_run": f"output-rs{run}.jsonl", "decided_by": by}}
                   for pid, run, by in zip(EXPECTED, runs, how, strict=True)]  # fmt: skip
        (picks / name).write_text("".join(json.dumps(r) + "\n" for r in records))
        (picks / f"{name}.done").write_text("")
    assert main(["summarize", str(bench)]) == 0
    metrics = json.loads((bench / "metrics.json").read_text())["toy"]
    got = {mode: round(metrics[mode]["symbolic_correct"], 2) for mode in metrics if mode.endswith("@3")}
    assert got == {"majority@3": 0.0, "pass@3": 100.0, "majority[equivalent]@3": 33.33,
                   "weighted[reward_model_score]@3": 66.67, "weighted[mean_logprob]@3": 33.33,
                   "sc-tir@3": 100.0, "genselect@3": 83.33}  # fmt: skip
    # how the picks were made, over both GenSelect outputs: the majority fallbacks counted apart
    assert metrics["genselect@3"]["decided_by"] == {"judgment": 3, "fallback": 1, "unanimous": 2}
    assert "genselect@3 picks: 3 by judgment, 1 by majority fallback, 2 unanimous" in capsys.readouterr().out


def test_weighted_and_sc_tir_modes_need_their_fields_in_every_sample(tmp_path):
    from pipeline_kit.cli.main import main

    bench = tmp_path / "toy"
    bench.mkdir()
    for seed, rows in enumerate(SCORED):  # seed 1 was never scored, and no run used code
        records = [
            {"id": pid, "expected_answer": EXPECTED[pid], "predicted_answer": answer, "symbolic_correct": ok,
             "num_generated_tokens": 10, "generation_time": 0.1, **({"reward_model_score": score} if seed != 1 else {})}
            for pid, answer, ok, score, _, _ in rows
        ]  # fmt: skip
        (bench / f"output-rs{seed}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    assert main(["summarize", str(bench)]) == 0
    modes = set(json.loads((bench / "metrics.json").read_text())["toy"])
    assert "majority[equivalent]@3" in modes and not {m for m in modes if m.startswith(("weighted", "sc-tir"))}


def test_generate_records_mean_logprob_and_select_weighs_by_it(kit, none_cluster, stub, tmp_path):
    """++inference.logprobs=true asks for the tokens' log-probabilities (the stub gives seed s's tokens -(1 + s)/10,
    and answers n + s); kit select --weight_field=mean_logprob weighs by exp of it: the distinct answers each have one
    vote, so seed 0's (the most probable, and the right one) wins every problem."""
    from conftest import problems, rows

    server = stub("--add_seed")
    inp, out = problems(tmp_path, 3), tmp_path / "out"
    res = kit("generate", *none_cluster, "--server_type=openai", f"--server_address={server.url}", "--model=stub",
              f"--input_file={inp}", f"--output_dir={out}", "--num_random_seeds=3", "++inference.logprobs=true",
              "++inference.temperature=0.7")  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    for seed in range(3):
        assert [r["mean_logprob"] for r in rows(out / f"output-rs{seed}.jsonl")] == pytest.approx(
            [-(1 + seed) / 10] * 3
        )
    assert all(r["body"]["logprobs"] is True for r in server.requests())
    sel = kit("select", f"--input_dir={out}", "--method=weighted", "--weight_field=mean_logprob",
              f"--output_file={tmp_path / 'w.jsonl'}")  # fmt: skip
    assert sel.returncode == 0 and "3 problems, 100.00% correct" in sel.stdout, sel.stdout + sel.stderr
