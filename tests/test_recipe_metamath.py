"""`kit run_recipe metamath`: the masking rule and the build step's filters on constructed files, the whole recipe
against the scripted stub (keep/drop worked out by hand, a rerun submits nothing, a changed stage reruns it and
the later ones), bad input as one line, and the recipe end to end with the tiny model on none."""

from __future__ import annotations

import json
import time
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


def test_bad_records_name_file_and_line(tmp_path):
    path = write_jsonl(tmp_path / "in.jsonl", [{"id": 1, "problem": "What is 1+1?", "expected_answer": "2"},
                                               {"id": 1, "problem": "What is 1+2?", "expected_answer": "3"}])  # fmt: skip
    with pytest.raises(UserError, match=r"in.jsonl:2: id 1 is also on line 1; ids must be unique"):
        md.read_problems(path)
    write_jsonl(tmp_path / "solve" / "output-rs0.jsonl", [{"type": "AnsAug", "problem": "p", "generation": "g"}])
    with pytest.raises(UserError, match=r"output-rs0.jsonl:1: the record has no 'original_id'"):
        md.collect(str(tmp_path / "solve"), str(tmp_path / "m.jsonl"), str(tmp_path / "s.json"))


def metamath_input(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "gsm8k_train.jsonl", [
        {"id": "a", "problem": "What is 3+4?", "expected_answer": "7"},
        {"id": "b", "problem": "What is 0+7?", "expected_answer": "7"},
        {"id": "c", "problem": "What is 5+0?", "expected_answer": 5},
        {"id": "d", "problem": "What is 2+2?", "expected_answer": "4"},
    ])  # fmt: skip


def test_recipe_against_the_stub_keeps_what_checks_out_and_reruns_only_what_changed(kit, stub, tmp_path):
    """The stub answers \\boxed{<the last number of the prompt>}; every prompt ends with its question. So:
    AnsAug keeps b only (0+7 -> 7); a rephrasing is the reply \\boxed{<last number>}, a solution rather than a
    question: none; SV statements hold no x: none; FOBAR masks the first number occurring once and appends the
    answer, which the stub repeats: kept for c only (x+0 = 5 -> 5); d has no number occurring once: no SV/FOBAR."""
    model = stub()
    out = tmp_path / "mm"
    args = ["run_recipe", "metamath", "--model=m", "--server_type=openai", f"--server_address={model.url}",
            f"--input_file={metamath_input(tmp_path)}", f"--output_dir={out}", "--num_samples=2"]  # fmt: skip
    res = kit(*args)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    stages = ("prepare", "rephrase", "sv_rewrite", "build", "solve", "collect")
    assert plan_lines(res.stderr, "metamath") == dict.fromkeys(stages, "run")
    kept = rows(out / "metamath.jsonl")
    assert all(set(r) == QA_FIELDS and r["query"] == r["problem"] and r["response"] == r["generation"] for r in kept)
    assert [(r["type"], r["original_id"], r["query"], r["response"], r["expected_answer"]) for r in kept] == [
        ("AnsAug", "b", "What is 0+7?", "\\boxed{7}", "7"),
        (
            "FOBAR",
            "c",
            "What is x+0? If we know the answer to the above question is 5, what is the value of unknown variable x?",
            "\\boxed{5}",
            "5",
        ),
    ]  # fmt: skip  (the two samples of each question are the same: one record each)
    stats = json.loads((out / "collect" / "stats.json").read_text())
    assert {t: (s["questions"], s["solutions"], s["kept"]) for t, s in stats.items()} == {
        "AnsAug": (4, 8, 1), "Rephrased": (0, 0, 0), "SV": (0, 0, 0), "FOBAR": (3, 6, 1)}  # fmt: skip
    assert (
        len(list((out / "rephrase").glob("output-rs*.jsonl"))) == 2 and (out / "sv_rewrite" / "output.jsonl").exists()
    )
    sent = len(model.requests())
    assert sent == 4 * 2 + 3 + 7 * 2  # rephrasings, SV statements, solutions

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
    assert len(model.requests()) == sent + 7 * 3 and len(list(out.glob("solve.replaced-*"))) == 1
    assert len(rows(out / "metamath.jsonl")) == 2


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
    res = kit(*args, env=env)
    assert res.returncode == 0 and "nothing to submit" in res.stderr, res.stderr
