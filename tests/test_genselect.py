"""GenSelect (the tournament in pipeline_kit/selection/genselect.py, its prompt in inference/genselect.py): the
prompt, the windows and the judgment parsing on exact cases; the tournament through `kit generate
++generation_type=genselect` and `--genselect` against the stub server, whose judgments are scripted (it names the
largest \\boxed number); once against the real tiny model; and bad inputs as one line."""

from __future__ import annotations

import json

import pytest
from conftest import problems, rows

from pipeline_kit.inference.genselect import prompt_messages
from pipeline_kit.inference.prompts import load_prompt_config
from pipeline_kit.selection.genselect import Solution, parse_judgment, windows

# ---- the prompt and the parsing


def test_prompt_lists_the_solutions_after_any_thinking():
    record = {"id": 1, "problem": "What is 1+1?"}
    solutions = [
        Solution("output-rs0.jsonl", {**record, "generation": "<think>hmm</think>\n1+1=2, so \\boxed{2}."}, "2"),
        Solution("output-rs3.jsonl", {**record, "generation": "It is \\boxed{3}."}, "3"),
    ]
    messages = prompt_messages(load_prompt_config("generic/genselect"), solutions)
    assert messages == [
        {
            "role": "user",
            "content": "You will be given a math problem and 2 candidate solutions to it. Check each solution's "
            "reasoning\nand final answer, note where the solutions disagree and which reasoning holds up, and decide "
            "which solution is\nthe most likely to be correct.\n\nProblem:\nWhat is 1+1?\n\nSolution 0:\n1+1=2, so "
            '\\boxed{2}.\n\nSolution 1:\nIt is \\boxed{3}.\n\nWrite your comparison, then end with a last line "'
            'Judgment: <index>", where <index> is the number of the best\nsolution (0 to 1).',
        }
    ]


@pytest.mark.parametrize(
    ("n", "size", "lengths"),
    [(2, 8, [2]), (8, 8, [8]), (9, 8, [5, 4]), (7, 3, [3, 2, 2]), (16, 8, [8, 8]), (17, 4, [4, 4, 3, 3, 3])],
)
def test_windows_are_near_equal_and_keep_the_order(n, size, lengths):
    parts = windows(list(range(n)), size)
    assert [len(p) for p in parts] == lengths
    assert [x for p in parts for x in p] == list(range(n))


@pytest.mark.parametrize(
    ("text", "count", "index"),
    [
        ("Solution 1 checks out.\nJudgment: 1", 2, 1),
        ("Judgment: 0\nWait, no.\nJudgment: 2", 3, 2),  # the last one counts
        ("**Judgement:** Solution 1", 2, 1),
        ("judgment: #0.", 2, 0),
        ("Judgment: 2", 2, None),  # out of range
        ("Judgment: 7\nJudgment: 1", 2, 1),
        ("\\boxed{4} Judgment: none of them", 2, None),  # garbage
        ("", 3, None),
    ],
)
def test_parse_judgment(text, count, index):
    assert parse_judgment(text, count) == index


# ---- offline: kit generate ++generation_type=genselect over a folder of runs, judged by the stub


# per problem, per run (output-rs0..3.jsonl) the generation; the stub picks the largest \boxed number
RUNS = {
    "p0": ["\\boxed{3}", "\\boxed{9}", "\\boxed{5}", "\\boxed{7}"],  # 2 windows of 2, then their winners: rs1 (9)
    "p1 [garbage]": ["\\boxed{2}", "\\boxed{8}", "\\boxed{2}", "\\boxed{2}"],  # no judgment: fallback -> a 2
    "p2 [out of range]": ["\\boxed{1}", "\\boxed{1}", "\\boxed{5}", "none"],  # 2 + a bye, then 2: fallback -> a 1
    "p3": ["\\boxed{6}", "\\boxed{6.0}", "no answer", "\\boxed{6}"],  # one answer: no request
    "p4": ["I do not know.", "Hard to say.", "Maybe later.", "Too long to write."],
}


def write_runs(folder, runs=RUNS, seeds=4):
    folder.mkdir(parents=True, exist_ok=True)
    for seed in range(seeds):
        with (folder / f"output-rs{seed}.jsonl").open("w") as f:
            for pid, generations in runs.items():
                f.write(json.dumps({"id": pid, "problem": f"Problem {pid}?", "generation": generations[seed]}) + "\n")


def genselect(kit, cluster, server, runs, out, *extra):
    endpoint = ["--server_type=openai", f"--server_address={server.url}", "--model=stub"]
    io = [f"--output_dir={out}", "++generation_type=genselect", f"++input_dir={runs}", "++genselect.window=2"]
    return kit("generate", *cluster, *endpoint, *io, *extra)


def test_offline_tournament_picks_the_hand_computed_solutions(kit, none_cluster, stub, tmp_path):
    server = stub()
    write_runs(tmp_path / "runs")
    out = tmp_path / "picked"
    res = genselect(kit, none_cluster, server, tmp_path / "runs", out)
    assert res.returncode == 0, res.stdout + res.stderr
    picked = {r["id"]: r for r in rows(out / "output.jsonl")}
    assert list(picked) == list(RUNS)
    gs = {pid: r["genselect"] for pid, r in picked.items()}

    # p0: round 1 is two windows of 2, round 2 their winners; each judgment names the largest (its last line)
    assert (picked["p0"]["generation"], picked["p0"]["predicted_answer"]) == ("\\boxed{9}", "9")
    assert gs["p0"]["chosen_run"] == "output-rs1.jsonl" and gs["p0"]["decided_by"] == "judgment"
    assert [w["round"] for w in gs["p0"]["windows"]] == [1, 1, 2] and gs["p0"]["fallback"] == 0
    assert sorted(r for w in gs["p0"]["windows"][:2] for r in w["runs"]) == [f"output-rs{i}.jsonl" for i in range(4)]
    assert gs["p0"]["windows"][2]["runs"] == [w["winner"] for w in gs["p0"]["windows"][:2]]
    assert all(w["judgment"].startswith("Judgment: 1\n") and w["fallback"] is None for w in gs["p0"]["windows"])

    # p1: no judgment in any of the 3 windows -> each keeps its member with the most-voted answer (2, three votes)
    assert picked["p1 [garbage]"]["predicted_answer"] == "2" and gs["p1 [garbage]"]["decided_by"] == "fallback"
    assert gs["p1 [garbage]"]["chosen_run"] in {"output-rs0.jsonl", "output-rs2.jsonl", "output-rs3.jsonl"}
    assert gs["p1 [garbage]"]["fallback"] == 3
    assert {(w["picked"], w["fallback"]) for w in gs["p1 [garbage]"]["windows"]} == {(None, "majority")}

    # p2: 3 answered -> windows of 2 and 1 (a bye, not asked), then 2; both asked windows fall back to the 1s
    p2 = gs["p2 [out of range]"]
    assert picked["p2 [out of range]"]["predicted_answer"] == "1" and p2["candidates"] == 3 and p2["runs"] == 4
    assert [len(w["runs"]) for w in p2["windows"]] == [2, 1, 2] and p2["fallback"] == 2
    assert [w["judgment"] for w in p2["windows"]] == ["Judgment: 99", None, "Judgment: 99"]

    # p3: every answer is 6 -> no request; p4: no answer -> the first run's record, no request
    assert (gs["p3"]["decided_by"], gs["p3"]["chosen_run"], gs["p3"]["windows"]) == (
        "unanimous",
        "output-rs0.jsonl",
        [],
    )
    p4 = picked["p4"]
    assert (gs["p4"]["decided_by"], p4["predicted_answer"], p4["generation"]) == ("no_answer", None, "I do not know.")
    assert len(server.requests()) == 3 + 3 + 2

    # done: a rerun asks nothing; other GenSelect settings stop it with what changed
    again = genselect(kit, none_cluster, server, tmp_path / "runs", out)
    assert again.returncode == 0 and "1 of 1 units are done already" in again.stdout, again.stdout + again.stderr
    other = genselect(kit, none_cluster, server, tmp_path / "runs", out, "++genselect.window=3")
    assert other.returncode == 2 and "genselect.window: 2 → 3" in other.stderr, other.stderr
    assert len(server.requests()) == 8


def test_a_refused_window_falls_back_and_a_rerun_asks_that_problem_again(kit, none_cluster, stub, tmp_path):
    refusing = stub("--fail_status", "422", "--fail_when", "Problem p0?")
    write_runs(tmp_path / "runs")
    out = tmp_path / "picked"
    res = genselect(kit, none_cluster, refusing, tmp_path / "runs", out, "--expname=refused")
    assert res.returncode == 1, res.stdout + res.stderr
    assert "kit generate: error: 1 sample failed in" in res.stdout + res.stderr, res.stdout  # shown as it ran
    p0 = next(r for r in rows(out / "output.jsonl") if r["id"] == "p0")["genselect"]
    assert p0["decided_by"] == "fallback" and p0["fallback"] == 3
    assert {w["error"] for w in p0["windows"]} == {"HTTP 422: stub refuses this request (status 422)"}
    assert not (out / "output.jsonl.done").exists()

    healthy = stub()
    again = genselect(kit, none_cluster, healthy, tmp_path / "runs", out, "--expname=again")
    assert again.returncode == 0, again.stdout + again.stderr
    assert len(healthy.requests()) == 3 and all("Problem p0?" in r["prompt"] for r in healthy.requests())
    p0 = next(r for r in rows(out / "output.jsonl") if r["id"] == "p0")
    assert p0["genselect"]["decided_by"] == "judgment" and p0["predicted_answer"] == "9"
    assert (out / "output.jsonl.done").exists()


def test_online_genselect_after_the_seeds_in_one_run(kit, none_cluster, stub, tmp_path):
    """--genselect: a follow-on job picks among the 3 seeds; the stub answers n + seed, so seed 2's is the largest."""
    server = stub("--add_seed")
    inp, out = problems(tmp_path, 4), tmp_path / "out"
    endpoint = ["--server_type=openai", f"--server_address={server.url}", "--model=stub"]
    args = [*none_cluster, *endpoint, f"--input_file={inp}", f"--output_dir={out}", "--num_random_seeds=3"]
    res = kit("generate", *args, "--genselect", "++genselect.window=2", "++inference.temperature=0.7")
    assert res.returncode == 0, res.stdout + res.stderr
    picked = rows(out / "genselect" / "output.jsonl")
    assert [r["id"] for r in picked] == [0, 1, 2, 3]
    assert all(r["genselect"]["chosen_run"] == "output-rs2.jsonl" for r in picked), picked
    assert all(r["generation"] == f"\\boxed{{{r['id'] + 2}}}" for r in picked)
    # 3 candidates in windows of 2: 2 + a bye, then 2 -> 2 requests per problem after the 12 generations
    assert len(server.requests()) == 12 + 2 * 4
    assert (out / "genselect" / "output.jsonl.done").exists()
    # kit select reads those picks: each is the graded record of seed 2's run (n + 2: never right; seed 0 was)
    sel = kit("select", f"--input_dir={out}", "--method=genselect", f"--output_file={tmp_path / 'sel.jsonl'}")
    assert sel.returncode == 0 and "genselect over 3 runs: 4 problems, 0.00% correct" in sel.stdout, sel.stderr
    assert "(picks: 4 by judgment, 0 by majority fallback)" in sel.stdout  # the stub's judgments all parse
    chosen = rows(tmp_path / "sel.jsonl")
    assert [r["generation"] for r in chosen] == [f"\\boxed{{{i + 2}}}" for i in range(4)]
    assert all(r["symbolic_correct"] is False and r["selection"]["method"] == "genselect" for r in chosen)

    again = kit("generate", *args, "--genselect", "++genselect.window=2", "++inference.temperature=0.7")
    assert again.returncode == 0 and "3 of 3 units are done already" in again.stdout, again.stdout + again.stderr
    assert len(server.requests()) == 20


# ---- bad input: one line, nothing requested


@pytest.mark.parametrize(
    ("setup", "extra", "needle"),
    [
        ("missing", [], "++input_dir={runs}: no such folder"),
        ("empty", [], "++input_dir={runs}: no output-rs<seed>.jsonl in this folder"),
        ("runs", ["++genselect.window=1"], "++genselect.window=1: a window compares at least 2 solutions"),
        ("uneven", [], "output-rs1.jsonl and {runs}/output-rs0.jsonl hold other problems (id 'p4' is in only one"),
    ],
)
def test_bad_genselect_input_is_one_line(kit, none_cluster, stub, tmp_path, setup, extra, needle):
    server = stub()
    runs = tmp_path / "runs"
    if setup == "empty":
        runs.mkdir()
    elif setup in ("runs", "uneven"):
        write_runs(runs)
        if setup == "uneven":
            lines = (runs / "output-rs1.jsonl").read_text().splitlines()
            (runs / "output-rs1.jsonl").write_text("\n".join(lines[:-1]) + "\n")
    res = genselect(kit, none_cluster, server, runs, tmp_path / "out", *extra)
    wanted = needle.format(runs=runs)
    if setup == "uneven":  # found by the job, which fails with the line
        assert res.returncode != 0 and wanted in res.stdout + res.stderr, res.stdout + res.stderr
    else:
        assert res.returncode == 2 and wanted in res.stderr and res.stderr.count("\n") == 1, res.stderr
    assert server.requests() == [] and not (tmp_path / "out" / "output.jsonl").exists()


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["++generation_type=genselect"], "++generation_type=genselect needs ++input_dir (the folder of output-rs"),
        (["++generation_type=pick"], "++generation_type=pick is not one of generate, reward, genselect, magpie."),
        (["--genselect"], "--genselect picks among sampled solutions; add --num_random_seeds=N"),
    ],
)
def test_generation_type_and_genselect_flags_are_checked_at_submission(kit, none_cluster, tmp_path, flags, needle):
    endpoint = ["--server_type=openai", "--server_address=http://127.0.0.1:9/v1", "--model=stub"]
    io = [f"--input_file={problems(tmp_path, 2)}", f"--output_dir={tmp_path / 'out'}"]
    res = kit("generate", *none_cluster, *endpoint, *io, *flags)
    assert res.returncode == 2 and needle in res.stderr and res.stderr.count("\n") == 1, res.stderr


def test_kit_select_genselect_says_how_to_run_it(kit, tmp_path):
    write_runs(tmp_path / "runs")
    res = kit("select", f"--input_dir={tmp_path / 'runs'}", "--method=genselect", f"--output_file={tmp_path / 'o'}")
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert f"++generation_type=genselect ++input_dir={tmp_path / 'runs'}" in res.stderr


# ---- the real tiny model: it writes no usable judgment, so every asked window falls back


@pytest.mark.models
def test_real_tiny_model_falls_back_and_writes_well_formed_picks(kit, shared_vllm, tmp_path):
    """Against the session's shared vLLM server of the tiny model (conftest's `shared_vllm`: no start-up of its own;
    what is tested is the genselect generation, not the server)."""
    cluster, model, server = shared_vllm
    runs = {f"q{i}": [f"\\boxed{{{(i + s) % 3}}}" for s in range(3)] for i in range(3)}
    write_runs(tmp_path / "runs", runs, seeds=3)
    io = [f"--output_dir={tmp_path / 'out'}", "++generation_type=genselect", f"++input_dir={tmp_path / 'runs'}"]
    res = kit(
        "generate", *cluster, *model, f"--server_address={server.url}", "--expname=genselect", *io,
        "++genselect.window=2", "++inference.tokens_to_generate=8", timeout=600,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    picked = rows(tmp_path / "out" / "output.jsonl")
    assert [r["id"] for r in picked] == list(runs)
    for record in picked:
        gs = record["genselect"]
        assert record["generation"] == runs[record["id"]][int(gs["chosen_run"][9])]
        assert [len(w["runs"]) for w in gs["windows"]] == [2, 1, 2]
        for w in gs["windows"]:
            assert (w["picked"] is None) == (w["fallback"] == "majority"), w
        assert gs["decided_by"] == ("fallback" if gs["fallback"] else "judgment")
    assert sum(r["genselect"]["fallback"] for r in picked) >= 1  # the tiny model never learnt "Judgment: N"
