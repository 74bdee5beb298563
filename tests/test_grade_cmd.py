"""`kit grade` and `python -m pipeline_kit.grading.grade`: result files graded in place, idempotent, atomic,
with one-line errors that name the file and line."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline_kit.errors import UserError
from pipeline_kit.grading import grade as grade_module
from pipeline_kit.grading.grade import grade_files

ADDED = {"predicted_answer", "symbolic_correct", "grading_timed_out", "extract_mode", "grading_key"}


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    return path


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def records() -> list[dict]:
    return [
        {"id": 0, "expected_answer": "16", "generation": "so $\\boxed{016}$"},
        {"id": 1, "expected_answer": "\\frac{1}{2}", "generation": "The final answer is $0.5$. I hope it is correct."},
        {"id": 2, "expected_answer": "\\text{(B)}", "generation": "The answer is (C)."},
        {"id": 3, "expected_answer": "B", "generation": "so \\boxed{12}", "options": ["10", "12", "14"]},
        {"id": 4, "expected_answer": 18, "generation": "She makes 9 * 2 = 18 dollars.\n#### 18"},
        {"id": 5, "expected_answer": "(x+1)^2", "generation": "I am not sure."},
        {"id": 6, "expected_answer": "3, 5, 7", "generation": "\\boxed{7, 5, 3}", "problem": "Find the roots."},
        {"id": 7, "expected_answer": "3, 5, 7", "generation": "\\boxed{7, 5, 3}", "problem": "Find (a, b, c)."},
    ]


def test_kit_grade_folder_in_place(kit, tmp_path: Path):
    results = tmp_path / "results"
    out = write_jsonl(results / "math" / "output-rs0.jsonl", records())
    other = write_jsonl(results / "math" / "input.jsonl", records())
    before_other = other.read_bytes()
    r = kit("grade", str(results))  # --extract=boxed: an answer without \\boxed{} is no answer
    assert r.returncode == 0, r.stderr
    assert f"{out}: 8 records, 3 correct (37.5%)" in r.stdout
    graded = read_jsonl(out)
    assert [rec["predicted_answer"] for rec in graded] == ["016", None, None, "12", None, None, "7, 5, 3", "7, 5, 3"]
    assert {rec["extract_mode"] for rec in graded} == {"boxed"}

    r = kit("grade", str(results), "--extract=auto")  # the mode is part of the grading key: graded again
    assert r.returncode == 0, r.stderr
    assert f"{out}: 8 records, 5 correct (62.5%)" in r.stdout
    graded = read_jsonl(out)
    assert all(ADDED <= set(rec) for rec in graded)
    assert [rec["symbolic_correct"] for rec in graded] == [True, True, False, True, True, False, True, False]
    assert [rec["predicted_answer"] for rec in graded] == ["016", "0.5", "C", "12", "18", None, "7, 5, 3", "7, 5, 3"]
    assert {rec["extract_mode"] for rec in graded} == {"auto"}
    assert not any(rec["grading_timed_out"] for rec in graded)
    assert other.read_bytes() == before_other  # not an output*.jsonl

    r = kit("grade", str(results), "--extract=box")
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        "kit: error: --extract='box' is not an extraction mode; use one of: boxed, auto, mcq."
    ], r.stderr


def test_rerun_changes_nothing_and_regrades_what_changed(tmp_path: Path):
    out = write_jsonl(tmp_path / "output.jsonl", records())
    grade_files([out], workers=0, extract="auto")
    first, mtime = out.read_bytes(), out.stat().st_mtime_ns
    [summary] = grade_files([out], workers=0, extract="auto")
    assert out.read_bytes() == first and out.stat().st_mtime_ns == mtime  # not even rewritten
    assert (summary.records, summary.graded, summary.correct) == (8, 0, 5)

    graded = read_jsonl(out)
    graded[2]["generation"] = "The answer is (B)."  # a new generation with another answer
    graded[5]["expected_answer"] = "\\text{I am not sure}"  # a fixed expected answer
    graded[0]["generation"] = "hence \\boxed{16}"  # another generation, the same verdict: still graded again
    write_jsonl(out, graded)
    [summary] = grade_files([out], workers=0, extract="auto")
    assert summary.graded == 3
    regraded = read_jsonl(out)
    assert [rec["symbolic_correct"] for rec in regraded][:6] == [True, True, True, True, True, False]
    assert regraded[0]["predicted_answer"] == "16"

    [summary] = grade_files([out], workers=0, force=True, extract="auto")
    assert summary.graded == 8


def test_timeout_is_recorded(tmp_path: Path):
    out = write_jsonl(
        tmp_path / "output.jsonl", [{"expected_answer": "x + \\sqrt{2}", "generation": "\\boxed{3^{3^{20}}}"}]
    )
    [summary] = grade_files([out], workers=0, timeout=0.5)
    [rec] = read_jsonl(out)
    assert rec["grading_timed_out"] is True and rec["symbolic_correct"] is False and summary.timed_out == 1


def test_python_m_entry_point_matches_kit_grade(kit, tmp_path: Path):
    a = write_jsonl(tmp_path / "a" / "output-rs0.jsonl", records())
    b = write_jsonl(tmp_path / "b" / "output-rs0.jsonl", records())
    assert kit("grade", str(a), "--workers", "2").returncode == 0
    proc = subprocess.run(
        [sys.executable, "-m", "pipeline_kit.grading.grade", str(b), "--workers", "2"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert a.read_text() == b.read_text()


def test_killed_run_leaves_the_file_as_it_was_and_its_workers_exit(tmp_path: Path):
    slow = [{"expected_answer": "x + \\sqrt{2}", "generation": f"\\boxed{{3^{{3^{{20}}}} + {i}}}"} for i in range(20)]
    out = write_jsonl(tmp_path / "output.jsonl", records() + slow)
    before = out.read_bytes()
    argv = [sys.executable, "-m", "pipeline_kit.grading.grade", str(out), "--workers", "2", "--timeout", "2"]
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE)
    children: list[str] = []
    deadline = time.monotonic() + 60  # its workers start once it has imported the grader: seconds on a loaded machine
    while len(children) < 2 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
    assert proc.poll() is None, "grading ended before it could be killed"
    assert len(children) == 2, children
    proc.kill()  # the parent only: its workers must notice and exit by themselves
    proc.wait()
    assert out.read_bytes() == before
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and any(_alive(int(pid)) for pid in children):
        time.sleep(0.2)
    assert not any(_alive(int(pid)) for pid in children), "grading workers outlived their parent"
    assert b"Traceback" not in proc.stderr.read()


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ('{"generation": "\\\\boxed{1}"}\n', "output.jsonl:1: the record has no 'expected_answer'"),
        (
            '{"expected_answer": "1", "generation": "1"}\n{"expected_answer": "1"}\n',
            "output.jsonl:2: the record has no 'generation'",
        ),  # fmt: skip
        ('{"expected_answer": "1", "generation": "1"}\n{not json\n', "output.jsonl:2 is not valid JSON"),
        ("[1, 2]\n", "output.jsonl:1 is not a JSON object"),
        (
            '{"expected_answer": ["1"], "generation": "1"}\n',
            "output.jsonl:1: expected_answer must be a string or a number",
        ),  # fmt: skip
        ('{"expected_answer": "B", "generation": "1", "options": 5}\n', "output.jsonl:1: options must be a list"),
    ],
)
def test_bad_records_are_one_line_errors(kit, tmp_path: Path, content: str, needle: str):
    out = tmp_path / "output.jsonl"
    out.write_text(content)
    r = kit("grade", str(out))
    assert r.returncode == 2 and r.stderr.startswith("kit: error: ") and needle in r.stderr, r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert out.read_text() == content


def test_missing_paths_and_bad_flags(kit, tmp_path: Path):
    r = kit("grade", str(tmp_path / "nope.jsonl"))
    assert r.returncode == 2 and f"kit: error: {tmp_path / 'nope.jsonl'}: no such file or folder" in r.stderr
    (tmp_path / "empty").mkdir()
    r = kit("grade", str(tmp_path / "empty"))
    assert r.returncode == 2 and "no output*.jsonl files under this folder" in r.stderr
    r = kit("grade", str(tmp_path), "--timeout", "0")
    assert r.returncode == 2 and "--timeout must be a positive number" in r.stderr
    proc = subprocess.run(
        [sys.executable, "-m", "pipeline_kit.grading.grade", "--workers", "x", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and proc.stderr.startswith("kit: error: argument --workers: invalid int value")
    assert proc.stderr.count("\n") == 1


def test_file_rewritten_meanwhile_is_not_overwritten(tmp_path: Path, monkeypatch):
    out = write_jsonl(tmp_path / "output.jsonl", records())
    real = grade_module._read

    def read_then_regenerate(path, force, extract):
        f = real(path, force, extract)
        time.sleep(0.01)
        write_jsonl(path, records()[:2])  # a generation rerun replaced the file while it was being graded
        return f

    monkeypatch.setattr(grade_module, "_read", read_then_regenerate)
    with pytest.raises(UserError, match="changed while it was being graded"):
        grade_files([out], workers=0)
    assert len(read_jsonl(out)) == 2


def test_missing_math_verify_is_one_line(tmp_path: Path, monkeypatch):
    from pipeline_kit.grading import grader_pool

    out = write_jsonl(tmp_path / "output.jsonl", [{"expected_answer": "6", "generation": "\\boxed{\\binom{4}{2}}"}])
    before = out.read_bytes()
    monkeypatch.setitem(sys.modules, "math_verify", None)  # import math_verify now raises ImportError
    grader_pool._cache.clear()
    with pytest.raises(UserError, match=r"needs math-verify .* pip install 'pipeline-kit\[eval\]'"):
        grade_files([out], workers=0)
    assert out.read_bytes() == before
    write_jsonl(out, [{"expected_answer": "12", "generation": "\\boxed{12}"}])  # the string rules need none
    assert grade_files([out], workers=0)[0].correct == 1


def test_mcq_mode_grades_letters_in_any_case(tmp_path: Path):
    out = write_jsonl(
        tmp_path / "output.jsonl",
        [
            {"expected_answer": "C", "generation": "Checking each option, the answer is (c)."},
            {"expected_answer": "b", "generation": "first \\boxed{A}, then on reflection \\boxed{B}"},
            {"expected_answer": "\\text{(A)}", "generation": "Answer: D"},
            {"expected_answer": "B", "generation": "I cannot tell."},
            {"expected_answer": "B", "generation": "so \\boxed{12}", "options": ["10", "12", "14"]},  # a letter only
        ],
    )
    [summary] = grade_files([out], workers=0, extract="mcq")
    graded = read_jsonl(out)
    assert [r["predicted_answer"] for r in graded] == ["C", "B", "D", None, None]
    assert [r["symbolic_correct"] for r in graded] == [True, True, False, False, False]
    assert summary.correct == 2 and {r["extract_mode"] for r in graded} == {"mcq"}
    write_jsonl(out, [{"expected_answer": "12", "generation": "\\boxed{12}"}])
    with pytest.raises(UserError, match=r"output.jsonl:1: extraction mode mcq grades option letters, but expected"):
        grade_files([out], workers=0, extract="mcq")


def test_lists_in_any_order_when_the_problem_or_the_benchmark_says_so(tmp_path: Path):
    rows = [
        {"expected_answer": "-2, 3", "generation": "\\boxed{3, -2}", "problem": "Find all real x with x^2 = x + 6."},
        {"expected_answer": "-2, 3", "generation": "\\boxed{3, -2}", "problem": "Give a and b in increasing order."},
        {"expected_answer": "(1,2), (2,1)", "generation": "\\boxed{(2,1), (1,2)}", "is_multiple_answer": True},
        {"expected_answer": "(1,2), (2,1)", "generation": "\\boxed{(2,1), (1,2)}", "is_multiple_answer": False},
    ]
    out = write_jsonl(tmp_path / "output.jsonl", rows)
    grade_files([out], workers=0)
    assert [r["symbolic_correct"] for r in read_jsonl(out)] == [True, False, True, False]


def test_a_generation_that_is_the_expected_answer_text_is_correct_in_auto_mode(tmp_path: Path):
    """IMO-AnswerBench's answers in words: the rules would cut "..., where $\\varphi = ...$" to a number; a whole
    generation that is the expected answer's text (whitespace aside) is that answer. Boxed mode still wants a box."""
    answer = "$\\lfloor\\varphi n\\rfloor$, where $\\varphi = \\frac{\\sqrt{5}+1}{2}$"
    rows = [
        {"expected_answer": answer, "generation": answer.replace(" ", "  ") + "\n"},
        {"expected_answer": answer, "generation": answer.replace("+1", "-1")},
    ]
    out = write_jsonl(tmp_path / "output.jsonl", rows)
    grade_files([out], workers=0, extract="auto")
    assert [r["symbolic_correct"] for r in read_jsonl(out)] == [True, False]
    grade_files([out], workers=0, extract="boxed")
    assert [r["symbolic_correct"] for r in read_jsonl(out)] == [False, False]
