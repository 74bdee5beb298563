"""`kit prepare_data` of the benchmarks added for today's papers (issue 33), through the real console script against
the test mirror: the ones whose licence allows a copy (tests/data/benchmarks, SOURCES.md) from their real rows in
the upstream layout, the others (non-commercial, unlicensed, or without a copy) from small synthetic files in their
upstream layout. Every prepared file gets its row count and fingerprint beside it, and `kit prepare_data` says
whether they are the data kit pins."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from benchmark_upstream import checked_copy, jsonl, parquet, upstream_files
from conftest import REPO_ROOT, rows, skip_or_fail

from pipeline_kit.data_fingerprint import Fingerprint

COPIED = ["math", "algebra222", "college_math", "comp-math-24-25", "gaokao2023en", "math-odyssey", "mawps", "svamp"]


def test_copied_benchmarks_from_their_real_rows(kit, mirror, tmp_path):
    expected = {name: checked_copy(name) for name in COPIED}
    for name, records in expected.items():
        mirror.serve_all(name, upstream_files(name, records))
    data = tmp_path / "data"

    res = kit("prepare_data", *COPIED, f"--data_dir={data}", env=mirror.env)

    assert res.returncode == 0, res.stderr
    assert "[7/8] mawps multiarith (4/4): downloaded" in res.stderr  # one progress line per file
    for name, records in expected.items():
        got = rows(data / name / "test.jsonl")
        want = [r for r in records if r["expected_answer"].strip()]  # gaokao2023en: 2 upstream rows have none
        if name == "college_math":  # a subset: ids count the rows of the file served
            want = [{**r, "id": f"college_math-{i}"} for i, r in enumerate(want)]
        assert got == want, f"{name}: records differ from the checked copy"
        meta = json.loads((data / name / "test.meta.json").read_text())
        assert meta["rows"] == len(want) and meta["fingerprint"] == Fingerprint.of_records(want).digest, name
        if name == "college_math":  # only its CC BY rows are in this repository: not the pinned 2,818
            assert meta["pinned"] is False
            assert "college_math: warning: 1260 rows, fingerprint" in res.stderr
            assert "not the data kit pins for college_math (2818 rows, fingerprint 7d2d84c84553)" in res.stderr
        else:
            assert meta["pinned"] is True, name
            assert f"] {name}: {len(want)} rows, fingerprint {meta['fingerprint'][:12]} (as kit pins it)" in res.stderr
    by_id = {name: {r["id"]: r for r in rows(data / name / "test.jsonl")} for name in COPIED}
    assert len(by_id["math"]) == 5000 and by_id["math"]["math-0"]["expected_answer"] == "2"
    assert by_id["gaokao2023en"].keys().isdisjoint({"gaokao2023en-167", "gaokao2023en-192"})
    assert by_id["algebra222"]["algebra222-2"]["expected_answer"] == "9.57"  # a float answer as NeMo-Skills writes it
    assert by_id["math-odyssey"]["math-odyssey-0"]["expected_answer"] == "16"  # "16\\\\\n\\noindent" upstream
    assert by_id["mawps"]["mawps-addsub-0"]["expected_answer"] == "43"  # 43.0 upstream
    assert by_id["svamp"]["svamp-chal-1"]["problem"].startswith("Each pack of dvds costs 76 dollars.")


ASDIV_XML = b"""<?xml version='1.0' encoding='UTF-8'?>
<Machine-Reading-Corpus-File><ProblemSet>
<Problem ID="nluds-0001" Grade="1" Source="http://example.org"><Body>Seven red apples and two green apples are in
 the basket. </Body><Question>How many apples are in the basket?</Question><Solution-Type>Addition</Solution-Type>
<Answer>9 (apples)</Answer><Formula>7+2=9</Formula></Problem>
<Problem ID="nluds-0002" Grade="2" Source="http://example.org"><Body>Ann is 5 and Bob is 15.</Body>
<Question>How old are they?</Question><Solution-Type Subtype-1="x">Comparison</Solution-Type>
<Answer>5 (years old); 15 (years old)</Answer><Formula>N/A</Formula></Problem>
</ProblemSet></Machine-Reading-Corpus-File>
"""


def test_benchmarks_without_a_copy_from_synthetic_upstream_files(kit, mirror, tmp_path):
    """asdiv (CC BY-NC), brumo25 (CC BY-NC-SA), beyond-aime (no licence), gsm-plus and omni-math (no copy here):
    small files in their upstream layouts; kit prepares them and says they are not the rows it pins."""
    mirror.serve("asdiv", ASDIV_XML)
    mirror.serve(
        "brumo25",
        parquet([{"problem_idx": 7, "problem": "Compute $2^3$.", "answer": " 8 ", "problem_type": ["Algebra"]}]),
    )
    mirror.serve("beyond-aime", jsonl([{"question": "Q?", "answer": "3", "Question": "Q?", "Answer": "3"}]))
    gsm_plus = {"solution": "s", "seed_question": "q0", "seed_solution": "s0", "seed_answer": "3"}
    mirror.serve(
        "gsm-plus",
        jsonl(
            [
                {"question": "How many?", "answer": "4.0", "perturbation_type": "numerical substitution", **gsm_plus},
                {"question": "Who?", "answer": "None", "perturbation_type": "critical thinking", **gsm_plus},
                {"question": "How far?", "answer": "1,250", "perturbation_type": "digit expansion", **gsm_plus},
            ]
        ),
    )
    omni = {"domain": ["Mathematics -> Algebra"], "difficulty": 6.5, "solution": "s", "source": "imo"}
    mirror.serve("omni-math", parquet([{"problem": "Find all $n$.", "answer": "$n=1$", **omni}]))
    data = tmp_path / "data"
    names = ["asdiv", "brumo25", "beyond-aime", "gsm-plus", "omni-math"]

    res = kit("prepare_data", *names, f"--data_dir={data}", env=mirror.env)

    assert res.returncode == 0, res.stderr
    got = {name: rows(data / name / "test.jsonl") for name in names}
    assert got["asdiv"] == [
        {
            "id": "asdiv-nluds-0001",
            "problem": "Seven red apples and two green apples are in\n the basket. How many apples are in the basket?",
            "expected_answer": "9",
            "answer_raw": "9 (apples)",
            "type": "Addition",
            "formula": "7+2=9",
            "grade": "1",
            "source_url": "http://example.org",
            "source_id": "nluds-0001",
        },
        {
            "id": "asdiv-nluds-0002",
            "problem": "Ann is 5 and Bob is 15. How old are they?",
            "expected_answer": "5",  # a unit after each part: the first part, as NeMo-Skills reads it
            "answer_raw": "5 (years old); 15 (years old)",
            "type": "Comparison",
            "formula": "N/A",
            "grade": "2",
            "source_url": "http://example.org",
            "source_id": "nluds-0002",
        },
    ]
    assert got["brumo25"] == [
        {
            "id": "brumo25-7",
            "problem": "Compute $2^3$.",
            "expected_answer": "8",
            "problem_idx": 7,
            "problem_type": ["Algebra"],
        }
    ]
    assert got["beyond-aime"] == [{"id": "beyond-aime-0", "problem": "Q?", "expected_answer": "3"}]
    assert [(r["id"], r["expected_answer"], r["answer_raw"]) for r in got["gsm-plus"]] == [
        ("gsm-plus-0", "4", "4.0"),
        ("gsm-plus-1", "insufficient", "None"),
        ("gsm-plus-2", "1250", "1,250"),
    ]
    assert got["omni-math"][0] | {"reference_solution": None} == {
        "id": "omni-math-0",
        "problem": "Find all $n$.",
        "expected_answer": "$n=1$",
        "reference_solution": None,
        "domain": ["Mathematics -> Algebra"],
        "difficulty": 6.5,
        "source": "imo",
    }
    for name, pinned in [("asdiv", "2305 rows, fingerprint 968e9bd206db"), ("gsm-plus", "10552 rows")]:
        assert f"not the data kit pins for {name} ({pinned})" in res.stderr
    assert json.loads((data / "omni-math" / "test.meta.json").read_text())["pinned"] is None  # it pins rows only
    assert "not the data kit pins for omni-math (4428 rows)" in res.stderr


def mmlu_pro_row(qid: int, answer: str, index: int, options: int = 10) -> dict:
    return {
        "question_id": qid,
        "question": f"Question {qid}? ",
        "options": [f"option {k}" for k in range(options)],
        "answer": answer,
        "answer_index": index,
        "cot_content": "",
        "category": "physics",
        "src": "ori_mmlu-high_school_physics",
    }


def test_mmlu_pro_a_multiple_choice_benchmark(kit, mirror, tmp_path):
    """MMLU-Pro (MIT; no copy of its 12,032 rows here): a small parquet file in its upstream layout. The options are
    lettered into the problem, the expected answer is the letter, graded by --extract=mcq and the mcq metrics."""
    mirror.serve("mmlu-pro", parquet([mmlu_pro_row(70, "C", 2), mmlu_pro_row(71, "b", 1, options=4)]))
    data = tmp_path / "data"

    res = kit("prepare_data", "mmlu-pro", f"--data_dir={data}", env=mirror.env)

    assert res.returncode == 0, res.stderr
    got = rows(data / "mmlu-pro" / "test.jsonl")
    assert [(r["id"], r["expected_answer"]) for r in got] == [("mmlu-pro-70", "C"), ("mmlu-pro-71", "B")]
    assert got[1]["problem"] == "Question 71?\n\nA. option 0\nB. option 1\nC. option 2\nD. option 3"
    assert got[0]["options"][9] == "option 9" and got[0]["category"] == "physics"
    assert "not the data kit pins for mmlu-pro (12032 rows)" in res.stderr

    graded = tmp_path / "output.jsonl"
    answers = ["... so the answer is \\boxed{C}.", "Answer: (D)"]
    graded.write_text("".join(json.dumps({**r, "generation": a}) + "\n" for r, a in zip(got, answers, strict=True)))
    res = kit("grade", str(graded), "--extract=mcq")
    assert res.returncode == 0, res.stderr
    assert [(r["predicted_answer"], r["symbolic_correct"]) for r in rows(graded)] == [("C", True), ("D", False)]

    mirror.serve("mmlu-pro", parquet([mmlu_pro_row(72, "C", 3)]))  # the letter and the index disagree
    res = kit("prepare_data", "mmlu-pro", f"--data_dir={tmp_path / 'bad'}", env=mirror.env)
    assert res.returncode == 2 and "row 1 of 'mmlu-pro' upstream" in res.stderr
    assert "answer 'C' is not option 3 of 10" in res.stderr and "Traceback" not in res.stderr


# Counts the process's threads around kit's read of a parquet upstream, in a fresh interpreter (pyarrow imported first).
COUNT_THREADS = """
import os, sys
import pyarrow.parquet
from pipeline_kit.benchmarks.prepare import _parquet
data = open(sys.argv[1], "rb").read()
before = len(os.listdir("/proc/self/task"))
got = _parquet(data, "https://u/test.parquet", "mmlu-pro", "bad", "hint")
print(len(got), before, len(os.listdir("/proc/self/task")))
"""


def test_a_parquet_upstream_is_read_on_the_callers_thread_alone(tmp_path):
    """An Arrow thread alive at interpreter exit may drop the last reference to a buffer that holds a Python object;
    it cannot take the GIL then, and the process aborts ("terminate called without an active exception", exit -6:
    test_mmlu_pro's flake, after a successful prepare). pq.read_table started two such threads even with
    use_threads=False; kit's read starts none."""
    if not os.path.isdir("/proc/self/task"):
        skip_or_fail("counting a process's threads needs Linux's /proc")
    upstream = tmp_path / "test.parquet"
    upstream.write_bytes(parquet([mmlu_pro_row(70, "C", 2), mmlu_pro_row(71, "b", 1, options=4)]))
    env = {**os.environ, "PYTHONPATH": f"{REPO_ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.run(
        [sys.executable, "-c", COUNT_THREADS, str(upstream)], capture_output=True, text=True, env=env, check=False
    )
    assert proc.returncode == 0, proc.stderr
    count, before, after = map(int, proc.stdout.split())
    assert count == 2 and after == before, proc.stdout
