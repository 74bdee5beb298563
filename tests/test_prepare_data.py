"""`kit prepare_data` and the benchmark registry. A local HTTP server plays every upstream host: it serves files in
the upstream formats (field names, JSONL/parquet) rebuilt from the checked copies in tests/data/benchmarks (see its SOURCES.md),
and KIT_DATASETS_BASE_URL points kit at it, so the real download, parsing and conversion code runs through the
console script. `math` and `hmmt_feb25` have no checked copy: they get small synthetic upstream-format files."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from benchmark_upstream import VAR, checked_copy, jsonl, parquet, upstream_files, upstream_path
from conftest import free_port, need_module, rows

from pipeline_kit.benchmarks import SHIPPED_BENCHMARKS

COUNTS = {
    "math500": 500,
    "aime24": 30,
    "aime25": 30,
    "amc23": 40,
    "gsm8k": 1319,
    "minerva_math": 272,
    "olympiadbench": 675,
}


def one_error_line(res) -> str:
    assert res.returncode == 2, (res.stdout, res.stderr)
    *progress, line = res.stderr.strip().splitlines()
    assert line.startswith("kit: error: ") and "Traceback" not in res.stderr, res.stderr
    assert all(re.match(r"\[\d+/\d+\] ", p) for p in progress), res.stderr  # before the error: progress only
    return line


# ---- the shipped benchmarks, end to end


def test_shipped_benchmarks_from_their_upstream_formats(kit, mirror, tmp_path):
    expected = {name: checked_copy(name) for name in COUNTS}
    for name, records in expected.items():
        mirror.serve(name, upstream_files(name, records)[""])
    data = tmp_path / "data"

    res = kit("prepare_data", *COUNTS, f"--data_dir={data}", env=mirror.env)

    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == [f"{name}: {data / name / 'test.jsonl'}" for name in COUNTS]
    assert f"[1/{len(COUNTS)}] math500: downloaded" in res.stderr  # the progress line (stderr is no terminal)
    got = {name: rows(data / name / "test.jsonl") for name in COUNTS}
    for name, count in COUNTS.items():
        assert len(got[name]) == count, name
        assert got[name] == expected[name], f"{name}: records differ from the checked copy"
    answers = {name: {r["id"]: r["expected_answer"] for r in records} for name, records in got.items()}
    assert answers["math500"]["test/algebra/1143.json"] == "17"
    assert answers["math500"]["test/precalculus/807.json"] == "\\left( 3, \\frac{\\pi}{2} \\right)"
    aime24_i_2 = next(r for r in got["aime24"] if r["contest"] == "AIME I" and r["problem_number"] == 2)
    assert (aime24_i_2["answer_raw"], aime24_i_2["expected_answer"]) == ("025", "25")
    assert (
        answers["aime25"]["aime25-0"] == "70"
        and answers["aime25"]["aime25-29"] == expected["aime25"][29]["expected_answer"]
    )
    assert (got["amc23"][0]["answer_raw"], got["amc23"][0]["expected_answer"]) == ("27.0", "27")
    assert answers["gsm8k"]["gsm8k-0"] == "18" and answers["gsm8k"]["gsm8k-2"] == "70000"
    assert answers["minerva_math"]["minerva_math-1"] == "4.5e33"
    assert answers["olympiadbench"]["olympiadbench-1610"] == "\\frac{1}{2 n+2}"  # "$...$" in final_answer


def test_hmmt_from_a_synthetic_upstream_file(kit, mirror, tmp_path):
    """HMMT Feb 2025's licence (CC BY-NC-SA) keeps its copy out of this repository: a small file in its upstream format
    (MathArena's parquet) stands in for it, and kit says that these are not the rows it pins."""
    mirror.serve(
        "hmmt_feb25",
        parquet(
            [
                {"problem_idx": 1, "problem": "Compute $1+1$.", "answer": "2", "problem_type": ["Algebra"]},
                {
                    "problem_idx": 2,
                    "problem": "Find $x$.",
                    "answer": "\\frac{9\\sqrt{23}}{23}",
                    "problem_type": ["Geometry"],
                },
            ]
        ),
    )
    data = tmp_path / "data"

    res = kit("prepare_data", "hmmt_feb25", f"--data_dir={data}", env=mirror.env)

    assert res.returncode == 0, res.stderr
    assert "hmmt_feb25: warning: 2 rows, fingerprint " in res.stderr
    assert "not the data kit pins for hmmt_feb25 (30 rows, fingerprint b3f9d42544d1)" in res.stderr
    hmmt = rows(data / "hmmt_feb25" / "test.jsonl")
    assert hmmt == [
        {
            "id": "hmmt_feb25-1",
            "problem": "Compute $1+1$.",
            "expected_answer": "2",
            "source_id": 1,
            "answer_raw": "2",
            "problem_type": ["Algebra"],
        },
        {
            "id": "hmmt_feb25-2",
            "problem": "Find $x$.",
            "expected_answer": "\\frac{9\\sqrt{23}}{23}",
            "source_id": 2,
            "answer_raw": "\\frac{9\\sqrt{23}}{23}",
            "problem_type": ["Geometry"],
        },
    ]


def test_arith_is_generated_without_a_download(kit, tmp_path):
    env = {VAR: f"http://127.0.0.1:{free_port()}"}  # nothing listens there: arith must not download
    res = kit("prepare_data", "arith", f"--data_dir={tmp_path}", env=env)
    assert res.returncode == 0, res.stderr
    records = rows(tmp_path / "arith" / "test.jsonl")
    assert len(records) == 50 and records[0] == {
        "id": "arith-0",
        "problem": "What is 3+4?",
        "expected_answer": "7",
        "a": 3,
        "b": 4,
    }
    assert all(
        r["problem"] == f"What is {r['a']}+{r['b']}?" and r["expected_answer"] == str(r["a"] + r["b"]) for r in records
    )
    assert all(0 <= r["a"] <= 9 and 0 <= r["b"] <= 9 for r in records)
    assert len({r["problem"] for r in records}) == 50
    again = kit("prepare_data", "arith", f"--data_dir={tmp_path / 'again'}", env=env)
    assert (tmp_path / "again" / "arith" / "test.jsonl").read_text() == (tmp_path / "arith" / "test.jsonl").read_text()
    assert again.returncode == 0


def test_a_folder_mirror_via_file_url(kit, tmp_path):
    """KIT_DATASETS_BASE_URL may name a folder (file://) laid out as HOST/PATH, for a machine without internet."""
    mirror = tmp_path / "mirror"
    upstream = mirror / upstream_path("gsm8k").lstrip("/")
    upstream.parent.mkdir(parents=True)
    upstream.write_bytes(
        jsonl([{"question": "Tom has 1,000 apples. How many?", "answer": "He has 1,000.\n#### 1,000"}])
    )
    res = kit("prepare_data", "gsm8k", f"--data_dir={tmp_path / 'data'}", env={VAR: mirror.as_uri()})
    assert res.returncode == 0, res.stderr
    assert rows(tmp_path / "data" / "gsm8k" / "test.jsonl")[0]["expected_answer"] == "1000"


# ---- bad input: one line, exit 2


def test_unknown_benchmark_and_unwritable_data_dir(kit, tmp_path):
    line = one_error_line(kit("prepare_data", "math5000", "arith", f"--data_dir={tmp_path}"))
    assert "unknown benchmark 'math5000'" in line and "Did you mean 'math500'?" in line
    assert f"Known: {', '.join(sorted(SHIPPED_BENCHMARKS))} (your own" in line
    assert not (tmp_path / "arith").exists()  # names are checked before anything is written
    assert "kit prepare_data math500 aime24" in one_error_line(kit("prepare_data"))
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("")
    line = one_error_line(kit("prepare_data", "arith", f"--data_dir={not_a_folder}"))
    assert f"cannot write {not_a_folder / 'arith' / 'test.jsonl'}" in line and "pass --data_dir DIR" in line


def test_unreachable_upstream_names_the_url_and_the_variable(kit, tmp_path):
    base = f"http://127.0.0.1:{free_port()}"
    line = one_error_line(kit("prepare_data", "gsm8k", f"--data_dir={tmp_path}", env={VAR: base}))
    assert f"cannot download {base}{upstream_path('gsm8k')}" in line
    assert f"{VAR}={base}" in line and "Connection refused" in line
    assert not (tmp_path / "gsm8k").exists()


@pytest.mark.parametrize(
    "name, body, expected",
    [
        ("gsm8k", b'{"question": "q", "answer": "#### 1"}\n{"question": "q2", "answ', "is not valid JSONL: line 2"),
        ("gsm8k", b"<html>Rate limited</html>\n", "is not valid JSONL: line 1"),
        ("gsm8k", b'["question", "answer"]\n', "line 1 is a list, not an object of fields"),
        (
            "math500",
            jsonl([{"problem": "p", "solution": "s", "subject": "x", "level": 1, "unique_id": "u"}]),
            "has no field 'answer'",
        ),
        (
            "gsm8k",
            jsonl([{"question": "q", "answer": "no marker"}]),
            "ValueError: its answer has no '#### <number>' line",
        ),
        ("hmmt_feb25", b"PAR1 this is no parquet file", "is not valid PARQUET"),
        ("aime24", None, "HTTP 404"),
    ],
    ids=["truncated", "html", "not-objects", "missing-field", "bad-value", "bad-parquet", "404"],
)
def test_malformed_upstream_file(kit, mirror, tmp_path, name, body, expected):
    if name == "hmmt_feb25":
        need_module("pyarrow", "hmmt_feb25's upstream is parquet: pip install 'pipeline-kit[data]'")
    if body is not None:
        mirror.serve(name, body)
    line = one_error_line(kit("prepare_data", name, f"--data_dir={tmp_path}", env=mirror.env))
    assert expected in line
    assert mirror.url in line  # the URL kit read
    assert not (tmp_path / name).exists()


# ---- a user's own benchmarks (--extra_datasets)

MINE = '''
"""Mine: two problems from a JSON array upstream."""
from pipeline_kit.benchmark_helpers import Source

GROUP = "math"
METRICS_TYPE = "math"
PROMPT_CONFIG = "generic/math"
SPLIT = "dev"
NUM_SAMPLES = 2
TEMPERATURE = 1.0
TOP_P = 1.0
TOKENS_TO_GENERATE = 256
REQUIRES_SANDBOX = False
SOURCE = Source("https://example.org/data/mine.json", "json")


def prepare(row, index):
    if row["skip"]:
        return None
    return {"id": row["key"], "problem": row["q"], "expected_answer": str(row["a"]), "skip": row["skip"]}
'''


def test_extra_datasets(kit, mirror, tmp_path):
    extra = tmp_path / "my_benchmarks"
    extra.mkdir()
    (extra / "mine.py").write_text(MINE)
    (extra / "_helpers.py").write_text("X = 1\n")  # a helper module, no benchmark
    items = [{"key": "m1", "q": "1+1?", "a": 2, "skip": False}, {"key": "m2", "q": "?", "a": 0, "skip": True}]
    mirror.files["/example.org/data/mine.json"] = json.dumps(items).encode()

    listing = kit("prepare_data", "--list", f"--extra_datasets={extra}")
    assert listing.returncode == 0, listing.stderr
    # name, rows (unknown: it pins none), seeds, tokens, licence (unstated), source
    assert any(
        line.split()[:7] == ["mine", "?", "2", "256", "not", "stated", "example.org"]
        for line in listing.stdout.splitlines()
    ), listing.stdout
    assert "_helpers" not in listing.stdout and "math500" in listing.stdout

    res = kit("prepare_data", "mine", f"--extra_datasets={extra}", env=mirror.env)  # no --data_dir: next to mine.py
    assert res.returncode == 0, res.stderr
    assert rows(extra / "mine" / "dev.jsonl") == [
        {"id": "m1", "problem": "1+1?", "expected_answer": "2", "skip": False}
    ]
    assert "mine" in one_error_line(kit("prepare_data", "mine"))  # unknown without the folder


@pytest.mark.parametrize(
    "edit, expected",
    [
        (lambda t: t.replace('PROMPT_CONFIG = "generic/math"\n', ""), "does not set PROMPT_CONFIG"),
        (lambda t: t.replace("TEMPERATURE =", "TEMPRATURE ="), "unknown setting TEMPRATURE; did you mean TEMPERATURE?"),
        (lambda t: t.replace("NUM_SAMPLES = 2", "NUM_SAMPLES = '2'"), "NUM_SAMPLES = '2' must be int"),
        (
            lambda t: t.replace('"json")', '"yaml")'),
            "Source format 'yaml' is not one of jsonl, json, csv, xml, parquet",
        ),
        (lambda t: t.replace("def prepare(row, index):", "def prepar(row, index):"), "defines no prepare(row, index)"),
        (lambda t: t + "\ndef broken(:\n", "syntax error in benchmark module"),
        (lambda t: t + '\nEXTRACT = "box"\n', "EXTRACT='box' is not an extraction mode; use one of: boxed, auto"),
        (
            lambda t: t.replace('METRICS_TYPE = "math"', 'METRICS_TYPE = "maths"'),
            "METRICS_TYPE = 'maths' is not a metrics type; use one of: 'math', 'mcq'.",
        ),
    ],
    ids=["missing", "typo", "type", "format", "no-prepare", "syntax", "extract", "metrics-type"],
)
def test_broken_extra_module_is_one_line(kit, tmp_path, edit, expected):
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "mine.py").write_text(edit(MINE))
    line = one_error_line(kit("prepare_data", "mine", f"--extra_datasets={extra}", f"--data_dir={tmp_path}"))
    assert str(extra / "mine.py") in line and expected in line


def test_extra_benchmark_may_not_shadow_a_shipped_one(kit, tmp_path):
    (tmp_path / "math500.py").write_text(MINE)
    line = one_error_line(kit("prepare_data", "arith", f"--extra_datasets={tmp_path}", f"--data_dir={tmp_path}"))
    assert "has the name of a shipped one" in line and "math500" in line
    assert "no such folder" in one_error_line(kit("prepare_data", "arith", f"--extra_datasets={tmp_path / 'nope'}"))


# ---- the registry API that `kit eval` uses


def test_extraction_mode_of_a_benchmark(tmp_path):
    """EXTRACT, else the `extract:` of its prompt config (also one given by ++prompt_config), else its
    METRICS_TYPE's: boxed for math, mcq for mcq."""
    from pipeline_kit.benchmarks import get_benchmark
    from pipeline_kit.errors import UserError

    (tmp_path / "stated.yaml").write_text("user: '{problem}'\nextract: auto\n")
    (tmp_path / "bad.yaml").write_text("user: '{problem}'\nextract: boxes\n")
    (tmp_path / "plain.py").write_text(MINE)
    (tmp_path / "fixed.py").write_text(MINE + '\nEXTRACT = "auto"\n')
    (tmp_path / "by_prompt.py").write_text(MINE.replace("generic/math", str(tmp_path / "stated.yaml")))
    assert get_benchmark("math500").extract_mode() == "boxed"
    assert get_benchmark("plain", tmp_path).extract_mode() == "boxed"  # generic/math names no mode
    assert get_benchmark("fixed", tmp_path).extract_mode() == "auto"
    assert get_benchmark("by_prompt", tmp_path).extract_mode() == "auto"
    assert get_benchmark("plain", tmp_path).extract_mode((f"++prompt_config={tmp_path / 'stated.yaml'}",)) == "auto"
    (tmp_path / "choices.py").write_text(MINE.replace('METRICS_TYPE = "math"', 'METRICS_TYPE = "mcq"'))
    (tmp_path / "choices_prompt.py").write_text(MINE.replace("generic/math", "generic/mcq"))
    assert get_benchmark("choices", tmp_path).extract_mode() == "mcq"  # generic/math names none: the type's
    assert get_benchmark("choices_prompt", tmp_path).extract_mode() == "mcq"  # generic/mcq's extract: mcq
    with pytest.raises(UserError, match=r"bad.yaml: extract='boxes' is not an extraction mode"):
        get_benchmark("plain", tmp_path).extract_mode((f"++prompt_config={tmp_path / 'bad.yaml'}",))


def test_registry_api():
    from pipeline_kit.benchmarks import benchmark_names, get_benchmark
    from pipeline_kit.errors import UserError
    from pipeline_kit.inference.prompts import load_prompt_config
    from pipeline_kit.resources import resource_dir

    names = benchmark_names()
    assert {*COUNTS, "math", "hmmt_feb25", "arith"} <= set(names)
    for name in names:
        bench = get_benchmark(name)
        kind = "mcq" if name == "mmlu-pro" else "math"
        assert bench.metrics_type == kind and bench.group == {"mcq": "multichoice", "math": "math"}[kind], name
        assert not bench.requires_sandbox and bench.extract_mode() == ("mcq" if kind == "mcq" else "boxed"), name
        assert "problem" in load_prompt_config(bench.prompt_config).fields()
        assert bench.data_file() == resource_dir("datasets_registry") / name / "test.jsonl"
        assert bench.data_file("/data") == Path("/data") / name / "test.jsonl"
        assert bench.description and (bench.source is None) == (name == "arith")
    aime = get_benchmark("aime24")
    assert aime.num_samples == 16 and (aime.temperature, aime.top_p, aime.tokens_to_generate) == (0.6, 0.95, 8192)
    assert aime.generation_overrides(sampled=True) == (
        "++prompt_config=generic/math",
        "++inference.temperature=0.6",
        "++inference.top_p=0.95",
        "++inference.tokens_to_generate=8192",
    )
    assert aime.generation_overrides(sampled=False)[1:] == (
        "++inference.temperature=0.0",
        "++inference.tokens_to_generate=8192",
    )
    with pytest.raises(UserError, match="Did you mean 'aime24'"):
        get_benchmark("aime2024")
