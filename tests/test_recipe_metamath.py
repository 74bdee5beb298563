"""`kit run_recipe metamath`: the masking rule and the build step's filters on constructed files, the whole recipe
against a stub scripted per prompt kind (every reply's verdict written beside it: the kept records of all four
kinds and stats.json's counts by reason follow; a rerun submits nothing, a changed stage reruns it and the later
ones), bad input as one line, and the recipe end to end with the tiny model on none."""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from pathlib import Path

import pytest
from conftest import SERVICES, need, plan_lines, rows

from pipeline_kit.errors import UserError
from pipeline_kit.recipes import metamath_data as md

QA_FIELDS = {"query", "response", "type", "problem", "generation", "expected_answer", "original_id"}


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.mark.parametrize(
    ("question", "masked"),
    [
        ("What is 3+4?", ("What is x+4?", "3")),
        ("What is 2+2+5?", ("What is 2+2+x?", "5")),  # 2 occurs twice: the first number that occurs once
        ("She paid $1,250 for 3.5 kg.", ("She paid $x for 3.5 kg.", "1250")),
        ("Tom has 3 apples and x pears; how many?", None),  # x is taken
        ("What is 2+2?", None),  # no number occurs once
        ("Compute 2x+1 for v2 of the rule.", None),
        ("A 4x4 grid has 16 cells.", None),  # the x of "4x4" could be read as the variable: left alone
        ("How many sides has a hexagon?", None),
    ],
)
def test_mask_number_takes_the_first_number_that_occurs_once(question, masked):
    assert md.mask_number(question) == masked


def test_build_keeps_distinct_rephrasings_and_statements_that_ask_about_x(tmp_path):
    prepared = tmp_path / "prepare"
    write_jsonl(prepared / "originals.jsonl", [{"original_id": 7, "problem": "What is 3+4?", "expected_answer": "7"}])
    write_jsonl(prepared / "masked.jsonl",
                [{"original_id": 7, "masked_question": "What is x+4?", "answer": "7", "masked_value": "3"}])  # fmt: skip
    base = {"original_id": 7, "problem": "What is 3+4?", "expected_answer": "7"}
    write_jsonl(
        tmp_path / "rephrase" / "output-rs0.jsonl", [{**base, "generation": "Rephrased question: Add 3 and 4."}]
    )
    write_jsonl(tmp_path / "rephrase" / "output-rs1.jsonl", [{**base, "generation": "Add 3 and 4."}])  # a repeat
    write_jsonl(tmp_path / "rephrase" / "output-rs2.jsonl", [{**base, "generation": " What is  3+4? "}])  # the original
    write_jsonl(tmp_path / "rephrase" / "output-rs3.jsonl", [{**base, "generation": None, "error": "timeout"}])
    write_jsonl(tmp_path / "rephrase" / "output-rs4.jsonl", [{**base, "generation": "3+4 is \\boxed{7}"}])  # solved
    masked = {"original_id": 7, "masked_question": "What is x+4?", "answer": "7", "masked_value": "3"}
    write_jsonl(tmp_path / "sv" / "output.jsonl", [{**masked, "generation": "x plus 4 is 7."}])
    write_jsonl(tmp_path / "sv2" / "output.jsonl", [{**masked, "generation": "Three plus four is seven."}])
    out = tmp_path / "questions.jsonl"
    line = md.build(str(prepared), list(md.METHODS), str(out), str(tmp_path / "rephrase"), str(tmp_path / "sv"))
    assert line == "4 questions to solve: 1 AnsAug, 1 Rephrased, 1 SV, 1 FOBAR"
    assert [(q["type"], q["problem"], q["expected_answer"]) for q in rows(out)] == [
        ("AnsAug", "What is 3+4?", "7"),
        ("Rephrased", "Add 3 and 4.", "7"),
        ("SV", "x plus 4 is 7. What is the value of unknown variable x?", "3"),
        ("FOBAR", "What is x+4? If we know the answer to the above question is 7, what is the value of unknown "
                  "variable x?", "3"),
    ]  # fmt: skip
    md.build(str(prepared), ["sv"], str(out), None, str(tmp_path / "sv2"))
    assert rows(out) == []  # a statement without x asks nothing about x
    assert json.loads((tmp_path / "stats.json").read_text())["SV"] == {
        "candidates": 1, "questions": 0, "questions_dropped": {"no_x": 1}}  # fmt: skip


@pytest.mark.parametrize(
    ("statement", "verdict"),
    [
        ("Tom has x apples and 4 more, 7 in all.", "keep"),
        ("Tom has 7 apples.", "no_x"),
        ("Tom has x apples and 4 more, 7 in all, so x = 3.", "solved_instead"),
        ("Tom has x apples; x is $3 and he has 7.", "solved_instead"),
        ("Tom has x apples and 4 more, 7 in all: \\boxed{3}", "solved_instead"),
        ("Tom has x apples, and x = 30 would be too many; he has 7.", "keep"),  # not the masked 3
    ],
)
def test_a_statement_that_gives_x_away_asks_nothing(statement, verdict):
    masked = {"masked_value": "3"}
    assert md.sv_verdict({"generation": statement}, masked)[0] == verdict
    assert md.sv_verdict({"generation": None, "error": "timeout"}, masked) == ("failed_request", None)


def test_bad_records_name_file_and_line(tmp_path):
    path = write_jsonl(tmp_path / "in.jsonl", [{"id": 1, "problem": "What is 1+1?", "expected_answer": "2"},
                                               {"id": 1, "problem": "What is 1+2?", "expected_answer": "3"}])  # fmt: skip
    with pytest.raises(UserError, match=r"in.jsonl:2: id 1 is also on line 1; ids must be unique"):
        md.read_problems(path)
    write_jsonl(tmp_path / "solve" / "output-rs0.jsonl", [{"type": "AnsAug", "problem": "p", "generation": "g"}])
    built = tmp_path / "build" / "stats.json"
    with pytest.raises(UserError, match=r"build/stats.json: cannot read the build step's counts"):
        md.collect(str(tmp_path / "solve"), str(built), str(tmp_path / "m.jsonl"), str(tmp_path / "s.json"))
    built.parent.mkdir()
    built.write_text(json.dumps({"AnsAug": {"candidates": 1, "questions": 1, "questions_dropped": {}}}))
    with pytest.raises(UserError, match=r"output-rs0.jsonl:1: the record has no 'original_id'"):
        md.collect(str(tmp_path / "solve"), str(built), str(tmp_path / "m.jsonl"), str(tmp_path / "s.json"))


def metamath_input(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "gsm8k_train.jsonl", [
        {"id": "a", "problem": "What is 3+4?", "expected_answer": "7"},
        {"id": "b", "problem": "What is 0+7?", "expected_answer": "7"},
        {"id": "c", "problem": "What is 5+0?", "expected_answer": 5},
        {"id": "d", "problem": "What is 2+2?", "expected_answer": "4"},
    ])  # fmt: skip


# ---- the whole recipe against a stub scripted per prompt kind (tests/stub_openai_server.py --script)

A = "Tom has 3 apples and buys 4 more. How many apples does he have now?"
B = "A box holds 12 pens. How many pens are in 5 boxes?"
C = "Sara reads 10 pages a day for 10 days. How many pages does she read?"  # no number occurs once: no SV/FOBAR
D = "A car costs $1,200 and a bike costs $300. How much do both cost together?"
E = "A train travels 60 miles per hour for 2 hours. How far does it go?"
PROBLEMS = [("a", A, "7"), ("b", B, 60), ("c", C, "100"), ("d", D, "1500"), ("e", E, "120")]
MASKED = {  # prepare masks the first number whose value occurs once (1,200 is 1200)
    "a": ("Tom has x apples and buys 4 more. How many apples does he have now?", "3"),
    "b": ("A box holds x pens. How many pens are in 5 boxes?", "12"),
    "d": ("A car costs $x and a bike costs $300. How much do both cost together?", "1200"),
    "e": ("A train travels x miles per hour for 2 hours. How far does it go?", "60"),
}
ANSWER = {i: str(answer) for i, _, answer in PROBLEMS}
REPHRASINGS = {  # the rephrase prompt's replies, by seed (--num_rephrasings=2), and what build makes of them
    A: [("Rephrased question: Tom starts with 3 apples and then gets 4 more. How many apples does Tom have?", "keep"),
        ("Tom starts with 3 apples and then gets 4 more. How many apples does Tom have?", "duplicate")],
    B: [("If each box has 12 pens, how many pens do 5 boxes hold?", "keep"),
        ("Each box holds 12 pens, so 5 boxes hold 12 * 5 = \\boxed{60} pens.", "solved_instead")],
    C: [("Over 10 days, Sara reads 10 pages each day. What is the total number of pages she reads?", "keep"),
        (f" {C} ", "same_as_original")],
    D: [("A car is priced at $1,200 and a bike at $300. What is their total price?", "keep"),
        ("What do a $1,200 car and a $300 bike cost together?", "keep")],
    E: [("Rephrased question:", "empty"),
        ("Question: A train moves at 60 miles per hour for 2 hours. How far does it travel?", "keep")],
}  # fmt: skip
STATEMENTS = {  # the self_verification prompt's reply per masked question
    "a": ("Tom has x apples and buys 4 more, and now he has 7 apples.", "keep"),
    "b": ("A box holds some pens, and 5 boxes hold 60 pens.", "no_x"),  # x is gone: nothing to ask
    "d": ("A car costs $x and a bike costs $300, and together they cost $1,500.", "keep"),
    "e": ("A train travels x miles per hour for 2 hours and goes 120 miles, so x = 60.", "solved_instead"),
}
SV_ASKS = " What is the value of unknown variable x?"
FOBAR_ASKS = " If we know the answer to the above question is {}, what is the value of unknown variable x?"
SOLUTIONS = {  # (type, question, expected answer): the solve prompt's replies by seed (--num_samples=2), verdicts
    ("AnsAug", A, "7"): [("Tom has 3 + 4 = 7 apples. \\boxed{7}", "keep"), ("3 + 4 = 8. \\boxed{8}", "wrong_answer")],
    ("AnsAug", B, "60"): [("5 * 12 = \\boxed{60}", "keep"), ("5 * 12 = \\boxed{60}", "duplicate")],  # kept once
    ("AnsAug", C, "100"): [("She reads about 100 pages.", "no_answer"), ("10 * 10 = \\boxed{100}", "keep")],
    ("AnsAug", D, "1500"): [("1200 + 300 = \\boxed{1500}", "keep"), ("Together: \\boxed{1,500}", "keep")],
    ("AnsAug", E, "120"): [("60 * 2 = \\boxed{120}", "keep"), ("60 + 2 = \\boxed{62}", "wrong_answer")],
    ("Rephrased", REPHRASINGS[A][1][0], "7"): [("3 + 4 = \\boxed{7}", "keep"), ("He has \\boxed{7}.", "keep")],
    ("Rephrased", REPHRASINGS[B][0][0], "60"): [("\\boxed{17}", "wrong_answer"), ("\\boxed{2.4}", "wrong_answer")],
    ("Rephrased", REPHRASINGS[C][0][0], "100"): [("\\boxed{100}", "keep"), ("10 + 10 = \\boxed{20}", "wrong_answer")],
    ("Rephrased", REPHRASINGS[D][0][0], "1500"): [("\\boxed{1500}", "keep"), ("\\boxed{1500}", "duplicate")],
    ("Rephrased", REPHRASINGS[D][1][0], "1500"): [("\\boxed{1500}", "keep"), ("\\boxed{1200}", "wrong_answer")],
    ("Rephrased", REPHRASINGS[E][1][0].removeprefix("Question: "), "120"): [("\\boxed{120}", "keep"),
                                                                            ("\\boxed{120}", "duplicate")],
    ("SV", STATEMENTS["a"][0] + SV_ASKS, "3"): [("7 - 4 = 3, so x = \\boxed{3}", "keep"),
                                                ("He has \\boxed{7} apples.", "wrong_answer")],  # the forward answer
    ("SV", STATEMENTS["d"][0] + SV_ASKS, "1200"): [("1500 - 300 = \\boxed{1200}", "keep"),
                                                   ("x = 1,500 - 300 = \\boxed{1,200}", "keep")],
    ("FOBAR", MASKED["a"][0] + FOBAR_ASKS.format(7), "3"): [("x + 4 = 7, so x = \\boxed{3}", "keep"),
                                                            ("x = 7 + 4 = \\boxed{11}", "wrong_answer")],
    ("FOBAR", MASKED["b"][0] + FOBAR_ASKS.format(60), "12"): [("5x = 60, so x = \\boxed{12}", "keep"),
                                                              ("The answer is \\boxed{60}.", "wrong_answer")],
    ("FOBAR", MASKED["d"][0] + FOBAR_ASKS.format(1500), "1200"): [("x = \\boxed{1500}", "wrong_answer"),
                                                                  ("x + 300 = 1500", "no_answer")],
    ("FOBAR", MASKED["e"][0] + FOBAR_ASKS.format(120), "60"): [("x = 120 / 2 = \\boxed{60}", "keep"),
                                                               ("\\boxed{120}", "wrong_answer")],
}  # fmt: skip


def stub_script(path: Path) -> Path:
    """The rules of the scripted stub: each prompt kind (prompts/metamath/*.yaml) ends with its question."""
    ask = {"rephrase": r"\ARewrite the math question below in different words\..*\n\nQuestion: ",
           "sv": r"\ABelow is a math question in which one quantity is the unknown x, .*\n\nQuestion: ",
           "solve": r"\ASolve the following math problem step by step\..*\n\n"}  # fmt: skip

    def rule(kind: str, question: str, replies: list[tuple[str, str]]) -> dict:
        return {"match": ask[kind] + re.escape(question) + r"\s*\Z", "replies": [text for text, _ in replies]}

    rules = [rule("rephrase", q, replies) for q, replies in REPHRASINGS.items()]
    rules += [rule("sv", f"{MASKED[i][0]}\nAnswer: {ANSWER[i]}", [reply]) for i, reply in STATEMENTS.items()]
    rules += [rule("solve", q, replies) for (_, q, _), replies in SOLUTIONS.items()]
    path.write_text(json.dumps(rules))
    return path


def test_recipe_against_a_scripted_stub_keeps_all_four_kinds_and_counts_each_drop(kit, stub, tmp_path):
    """Every reply of the scripted stub has the verdict the recipe must reach (the tables above), so the kept
    records and collect/stats.json's counts follow from the script; a rerun submits nothing, and a changed stage
    reruns it and the later ones."""
    model = stub("--script", str(stub_script(tmp_path / "script.json")))
    out = tmp_path / "mm"
    data = write_jsonl(
        tmp_path / "train.jsonl", [{"id": i, "problem": q, "expected_answer": a} for i, q, a in PROBLEMS]
    )
    args = ["run_recipe", "metamath", "--model=m", "--server_type=openai", f"--server_address={model.url}",
            f"--input_file={data}", f"--output_dir={out}", "--num_samples=2", "--num_rephrasings=2"]  # fmt: skip
    t0 = time.time()
    res = kit(*args)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    print(f"metamath recipe on none against the scripted stub, 6 stages: {time.time() - t0:.1f}s")
    stages = ("prepare", "rephrase", "sv_rewrite", "build", "solve", "collect")
    assert plan_lines(res.stderr, "metamath") == dict.fromkeys(stages, "run")
    sent = len(model.requests())
    assert sent == 5 * 2 + 4 + len(SOLUTIONS) * 2  # rephrasings, SV statements, solutions: no prompt unscripted
    assert not [r for f in (out / "solve").glob("output-rs*.jsonl") for r in rows(f) if "error" in r]

    assert sorted(
        (q["type"], q["problem"], q["expected_answer"]) for q in rows(out / "build" / "questions.jsonl")
    ) == sorted(SOLUTIONS)  # fmt: skip  (every question the script solves was built, nothing else)
    kept = rows(out / "metamath.jsonl")
    assert all(set(r) == QA_FIELDS and r["query"] == r["problem"] and r["response"] == r["generation"] for r in kept)
    expected = {(t, q, a, text) for (t, q, a), replies in SOLUTIONS.items() for text, v in replies if v == "keep"}
    assert sorted((r["type"], r["query"], r["expected_answer"], r["response"]) for r in kept) == sorted(expected)
    assert len(kept) == 18 and {r["type"] for r in kept} == {"AnsAug", "Rephrased", "SV", "FOBAR"}

    stats = json.loads((out / "collect" / "stats.json").read_text())
    built = {t: (s["candidates"], s["questions"], s["questions_dropped"]) for t, s in stats.items()}
    assert built == {
        "AnsAug": (5, 5, {}),
        "Rephrased": (10, 6, {"duplicate": 1, "solved_instead": 1, "same_as_original": 1, "empty": 1}),
        "SV": (5, 2, {"no_number_to_mask": 1, "no_x": 1, "solved_instead": 1}),
        "FOBAR": (5, 4, {"no_number_to_mask": 1}),
    }
    verdicts = {t: Counter(v for (kind, _, _), replies in SOLUTIONS.items() if kind == t for _, v in replies)
                for t in stats}  # fmt: skip
    for t, s in stats.items():
        assert (s["solutions"], s["kept"], s["solutions_dropped"]) == (
            sum(verdicts[t].values()), verdicts[t].pop("keep"), dict(verdicts[t])), t  # fmt: skip
    assert {t: s["kept"] for t, s in stats.items()} == {"AnsAug": 6, "Rephrased": 6, "SV": 3, "FOBAR": 3}
    assert "kit metamath collect: 18 solutions kept: 6 AnsAug, 6 Rephrased, 3 SV, 3 FOBAR" in res.stderr

    res = kit(*args)  # the same settings: nothing is submitted, nothing reaches the server
    assert res.returncode == 0, res.stderr
    assert plan_lines(res.stderr, "metamath") == dict.fromkeys(stages, "skip") and len(model.requests()) == sent
    assert "every stage is done with the same settings; nothing to submit" in res.stderr

    res = kit(*[a.replace("--num_samples=2", "--num_samples=3") for a in args])  # solve changed: it and collect rerun
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    assert plan_lines(res.stderr, "metamath") == {
        **dict.fromkeys(stages[:4], "skip"),
        "solve": "rerun",
        "collect": "rerun",
    }
    assert len(model.requests()) == sent + len(SOLUTIONS) * 3 and len(list(out.glob("solve.replaced-*"))) == 1
    assert len(rows(out / "metamath.jsonl")) == 18  # seed 2 repeats seed 0's reply: a duplicate or a wrong one


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--methods=ansaug,fobr"], "--methods: unknown method 'fobr'. Did you mean 'fobar'?"),
        (["--num_samples=0"], "--num_samples=0: sample at least 1."),
        (["--generate_args=inference.temperature=1"], "--generate_args: 'inference.temperature=1' is not ++key=value"),
        (["--generate_args=++inference.tokens=8"], "unknown key"),
        (["--input_file=BAD"], "gsm8k_bad.jsonl:2: the record has no 'expected_answer'"),
        (["--model="], "--model is required"),
        (["--generate_args=++prompt_config=generic/math"], "--generate_args: ++prompt_config is set per stage"),
    ],
)
def test_bad_recipe_input_is_one_line(kit, tmp_path, args, needle):
    bad = write_jsonl(tmp_path / "gsm8k_bad.jsonl", [{"problem": "What is 1+1?", "expected_answer": "2"},
                                                     {"problem": "What is 1+2?", "answer": "3"}])  # fmt: skip
    args = [a.replace("BAD", str(bad)) for a in args]
    res = kit("run_recipe", "metamath", "--model=m", "--server_type=openai", "--server_address=http://127.0.0.1:9/v1",
              f"--input_file={metamath_input(tmp_path)}", f"--output_dir={tmp_path / 'out'}", *args, "--dry_run")  # fmt: skip
    assert res.returncode == 2, res.stdout + res.stderr
    assert needle in res.stderr and "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


@pytest.mark.models
def test_metamath_runs_end_to_end_with_the_tiny_model(kit, tmp_path):
    need("KIT_TEST_TINY_MODEL", "the tiny model (tests/services/models_up.sh)")
    env = {"KIT_SERVER_PYTHON": SERVICES["KIT_TEST_HF_PYTHON"]}
    out = tmp_path / "mm"
    args = ["run_recipe", "metamath", f"--model={SERVICES['KIT_TEST_TINY_MODEL']}", "--server_type=transformers",
            "--server_gpus=0", f"--input_file={metamath_input(tmp_path)}", f"--output_dir={out}", "--num_samples=2",
            "--num_rephrasings=1", "--generate_args=++inference.tokens_to_generate=16"]  # fmt: skip
    t0 = time.time()
    res = kit(*args, env=env, timeout=400)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    print(f"metamath recipe on none with the tiny model, 6 stages: {time.time() - t0:.1f}s")
    questions = rows(out / "build" / "questions.jsonl")
    assert {q["type"] for q in questions} >= {"AnsAug", "FOBAR"} and len(questions) >= 7
    assert all(set(q) == {"type", "original_id", "problem", "expected_answer"} for q in questions)
    kept = rows(out / "metamath.jsonl")
    assert kept, "the tiny model answers a+b: some AnsAug solutions must be kept"
    for r in kept:
        assert set(r) == QA_FIELDS and r["query"] == r["problem"] and r["response"] == r["generation"]
        assert f"\\boxed{{{r['expected_answer']}}}" in r["generation"], r  # the tiny model boxes its answer
    solved = [rec for f in sorted((out / "solve").glob("output-rs*.jsonl")) for rec in rows(f)]
    right = {(r["problem"], r["generation"]) for r in solved if r["symbolic_correct"]}
    assert {(r["problem"], r["generation"]) for r in kept} == right  # every right one, nothing else
    replies = [r for stage in ("rephrase", "sv_rewrite") for f in (out / stage).glob("output*.jsonl") for r in rows(f)]
    assert len(replies) == 4 + 3 and all(r["generation"] and "error" not in r for r in replies)  # the model answered
    stats = json.loads((out / "collect" / "stats.json").read_text())
    assert set(stats) == {"AnsAug", "Rephrased", "SV", "FOBAR"}
    for t, s in stats.items():  # every candidate and every solution is either kept or counted with its reason
        assert s["candidates"] == s["questions"] + sum(s["questions_dropped"].values()), (t, s)
        assert s["solutions"] == s["kept"] + sum(s["solutions_dropped"].values()), (t, s)
        assert s["kept"] == len([r for r in kept if r["type"] == t]) and "failed_request" not in str(s), (t, s)
    assert (stats["Rephrased"]["candidates"], stats["SV"]["candidates"]) == (4, 4)  # 4 replies; 3 masked + 1 without
    print("tiny model's counts:", {t: (s["questions"], s["kept"], s["questions_dropped"]) for t, s in stats.items()})
    res = kit(*args, env=env)
    assert res.returncode == 0 and "nothing to submit" in res.stderr, res.stderr
