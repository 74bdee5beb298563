"""`kit summarize`: the metrics of a small hand-made results folder worked out by hand (tests/data/summarize_results),
the layouts it accepts, its errors, --audit, --plot, and the pass@k estimator against brute-force enumeration."""

from __future__ import annotations

import itertools
import json
import math
import os
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

from pipeline_kit.cli.main import main
from pipeline_kit.data_fingerprint import Fingerprint
from pipeline_kit.evaluation.metrics import NON_MODE_KEYS, Run, pass_at_k, sampled_metrics

DATA = Path(__file__).parent / "data" / "summarize_results"
KIT = Path(sys.executable).parent / "kit"
pct = 100.0

# ---------------------------------------------------------------------------------------------------------------------
# The folder, by hand. algebra: output.jsonl (greedy) and seeds 0-3, problems p1..p5 (plus .done markers and an
# unmerged chunk file of seed 4, which are not outputs: seed 4 is named as unfinished). (answer, symbolic_correct) per seed, "-" = no predicted answer:
#        rs0      rs1      rs2            rs3
#   p1   2  ok    2  ok    3  x           2  ok       c=3  unanswered a=0
#   p2   4  x     5  ok    4  x           5  ok       c=2  a=0
#   p3   -  x     -  x     7  ok          -  x        c=1  a=3
#   p4   9  x     8  x     9  x (timeout) -  x        c=0  a=1
#   p5   1/2 ok   0.5 ok   1/3 x          1/3 x       c=2  a=0
# num_generated_tokens = 100 + 100*seed + 10*(problem index 0..4), generation_time = tokens / 100.
# greedy: 2 ok, 5 ok, -, 10 ok, 1/3 x; tokens 50, 60, 70, 80, 90; time = tokens / 100.
#
# geometry: seeds 1, 2, 10 (in that order: seeds sort as numbers), problems g1..g6, with a judge; rs2's lines are
# shuffled. (answer, symbolic, judge):
#        rs1          rs2          rs10
#   g1   A  S J       A  S J       A  S J
#   g2   B  - J       B  - J       C  - -
#   g3   D  S -       E  - -       D  S J
#   g4   (none)       F  - -       G  S J
#   g5   H  - -       I  S J       I  S J
#   g6   (none)       (none)       (none)
# tokens/time: rs1 100/1.0, rs2 200/2.0, rs10 300/3.0 for every problem.
# ---------------------------------------------------------------------------------------------------------------------


def sample_std(values: list[float]) -> float:
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


ALGEBRA = {
    # greedy: p1, p2, p4 correct of 5; p3 unanswered
    "greedy": {
        "num_entries": 5,
        "avg_tokens": 350 / 5,
        "gen_seconds": 3.5 / 5,
        "symbolic_correct": 3 / 5 * pct,
        "no_answer": 1 / 5 * pct,
    },
    # per-run accuracy: rs0 2/5 = 40, rs1 3/5 = 60, rs2 1/5 = 20, rs3 2/5 = 40; unanswered per run: 1, 1, 0, 2
    # token sums per run: 600, 1100, 1600, 2100
    "pass@1[avg-of-1]": {
        "avg_tokens": 600 / 5,
        "gen_seconds": 6.0 / 5,
        "symbolic_correct": 40.0,
        "symbolic_correct_std": 0.0,
        "no_answer": 1 / 5 * pct,
    },
    "pass@1[avg-of-2]": {
        "avg_tokens": 1700 / 10,
        "gen_seconds": 17.0 / 10,
        "symbolic_correct": (40 + 60) / 2,
        "symbolic_correct_std": math.sqrt((10**2 + 10**2) / 1),
        "no_answer": 2 / 10 * pct,
    },
    "pass@1[avg-of-3]": {
        "avg_tokens": 3300 / 15,
        "symbolic_correct": (40 + 60 + 20) / 3,
        "symbolic_correct_std": math.sqrt((0 + 20**2 + 20**2) / 2),
        "no_answer": 2 / 15 * pct,
    },
    "pass@1[avg-of-4]": {
        "num_entries": 5,
        "avg_tokens": 5400 / 20,
        "gen_seconds": 54.0 / 20,
        "symbolic_correct": (40 + 60 + 20 + 40) / 4,
        "symbolic_correct_std": math.sqrt((0 + 20**2 + 20**2 + 0) / 3),
        "no_answer": 4 / 20 * pct,
    },
    # majority@1 = rs0: p1, p5 correct; p3 unanswered
    "majority@1": {"symbolic_correct": 2 / 5 * pct, "no_answer": 1 / 5 * pct},
    # k=2: p1 "2" ok; p2 tie 4/5 -> 4 (first seen) x; p3 none; p4 tie 9/8 -> 9 x; p5 tie 1/2, 0.5 -> 1/2 ok
    "majority@2": {"symbolic_correct": 2 / 5 * pct, "no_answer": 1 / 5 * pct},
    # k=3: p1 2 ok; p2 4 (twice) x; p3 7 ok; p4 9 x; p5 three-way tie -> 1/2 ok
    "majority@3": {"symbolic_correct": 3 / 5 * pct, "no_answer": 0.0},
    # k=4: p1 2 ok; p2 tie 4/5 -> 4 x; p3 7 ok; p4 9 x; p5 1/3 (twice) x
    "majority@4": {"num_entries": 5, "avg_tokens": 270.0, "symbolic_correct": 2 / 5 * pct, "no_answer": 0.0},
    # pass@k = mean over problems of 1 - C(4-c, k) / C(4, k), c = 3, 2, 1, 0, 2
    "pass@1": {"symbolic_correct": (3 + 2 + 1 + 0 + 2) / 4 / 5 * pct, "no_answer": (3 + 1) / 4 / 5 * pct},
    # C(4,2) = 6: c=3 -> 1, c=2 -> 1 - 1/6, c=1 -> 1 - 3/6, c=0 -> 0; no answer: p3 C(3,2)/6 = 3/6, p4 C(1,2) = 0
    "pass@2": {"symbolic_correct": (1 + 5 / 6 + 1 / 2 + 0 + 5 / 6) / 5 * pct, "no_answer": (3 / 6) / 5 * pct},
    # C(4,3) = 4: c=3 -> 1, c=2 -> 1, c=1 -> 1 - 1/4, c=0 -> 0; no answer: p3 C(3,3)/4 = 1/4
    "pass@3": {"symbolic_correct": (1 + 1 + 3 / 4 + 0 + 1) / 5 * pct, "no_answer": (1 / 4) / 5 * pct},
    # any correct: p1, p2, p3, p5
    "pass@4": {"num_entries": 5, "avg_tokens": 270.0, "symbolic_correct": 4 / 5 * pct, "no_answer": 0.0},
}

# geometry per run (of 6): symbolic rs1 2, rs2 2, rs10 4; judge 2, 3, 4; both 1, 2, 4; any 3, 3, 4;
# unanswered 2, 1, 1
GEO_RUNS = {
    "symbolic_correct": [2, 2, 4],
    "judge_correct": [2, 3, 4],
    "both_correct": [1, 2, 4],
    "any_correct": [3, 3, 4],
}
GEOMETRY = {
    "pass@1[avg-of-1]": {"avg_tokens": 100.0, "gen_seconds": 1.0, "symbolic_correct": 2 / 6 * pct,
                         "judge_correct": 2 / 6 * pct, "both_correct": 1 / 6 * pct, "any_correct": 3 / 6 * pct,
                         "no_answer": 2 / 6 * pct},
    "pass@1[avg-of-3]": {"num_entries": 6, "avg_tokens": 200.0, "gen_seconds": 2.0,
                         **{col: sum(v) / 18 * pct for col, v in GEO_RUNS.items()},
                         **{f"{col}_std": sample_std([x / 6 * pct for x in v]) for col, v in GEO_RUNS.items()},
                         "no_answer": 4 / 18 * pct},
    # first two runs (rs1, rs2): g1 A S J; g2 B - J; g3 tie D/E -> D (rs1) S -; g4 F - -; g5 tie H/I -> H - -; g6 none
    "majority@2": {"symbolic_correct": 2 / 6 * pct, "judge_correct": 2 / 6 * pct, "both_correct": 1 / 6 * pct,
                   "any_correct": 3 / 6 * pct, "no_answer": 1 / 6 * pct},
    # all three: g1 A (rs1) S J; g2 B (rs1) - J; g3 D (rs1) S -; g4 tie F/G -> F (rs2, the lower seed) - -;
    # g5 I (first from rs2) S J; g6 none. (Sorting seeds as text, rs10 before rs2, would pick G and count g4.)
    "majority@3": {"num_entries": 6, "symbolic_correct": 3 / 6 * pct, "judge_correct": 3 / 6 * pct,
                   "both_correct": 2 / 6 * pct, "any_correct": 4 / 6 * pct, "no_answer": 1 / 6 * pct},
    # correct counts per problem g1..g6: symbolic 3,0,2,1,2,0; judge 3,2,1,1,2,0; C(3,2) = 3 so c=1 -> 1 - 1/3
    "pass@2": {"symbolic_correct": (1 + 0 + 1 + 2 / 3 + 1 + 0) / 6 * pct,
               "judge_correct": (1 + 1 + 2 / 3 + 2 / 3 + 1 + 0) / 6 * pct,
               "no_answer": (0 + 0 + 0 + 0 + 0 + 1) / 6 * pct},  # g6: C(3,2)/C(3,2); g4 (a=1): 0
    # any correct among the three: symbolic g1, g3, g4, g5; judge g1..g5; both (per sample) g1, g3, g4, g5;
    # any (per sample) g1..g5
    "pass@3": {"num_entries": 6, "avg_tokens": 200.0, "symbolic_correct": 4 / 6 * pct, "judge_correct": 5 / 6 * pct,
               "both_correct": 4 / 6 * pct, "any_correct": 5 / 6 * pct, "no_answer": 1 / 6 * pct},
}  # fmt: skip


def run_kit(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "KIT_HOME": str(cwd / ".kit")}
    return subprocess.run([str(KIT), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def copy_results(tmp_path: Path) -> Path:
    dst = tmp_path / "results"
    shutil.copytree(DATA, dst)
    return dst


def check(actual: dict, expected: dict) -> None:
    for key, want in expected.items():
        assert actual[key] == pytest.approx(want, abs=1e-3), key


def test_golden_summarize(tmp_path: Path):
    results = copy_results(tmp_path)
    out = run_kit("summarize", str(results), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    metrics = json.loads((results / "metrics.json").read_text())
    assert list(metrics) == ["algebra", "geometry"]
    ks4, ks3 = range(1, 5), range(1, 4)
    assert list(metrics["algebra"]) == [
        "greedy",
        *(f"pass@1[avg-of-{k}]" for k in ks4),
        *(f"majority@{k}" for k in ks4),
        *(f"pass@{k}" for k in ks4),
        "majority[equivalent]@4",
        "data",
        "unfinished",
    ]
    assert metrics["algebra"]["unfinished"] == ["output-rs4.jsonl"]
    assert "unfinished: seed 4 (chunk or in-progress files, no merged output), left out of this table" in out.stdout
    assert "unfinished" not in metrics["geometry"]
    assert set(metrics["geometry"]) == {
        *(f"pass@1[avg-of-{k}]" for k in ks3),
        *(f"majority@{k}" for k in ks3),
        *(f"pass@{k}" for k in ks3),
        "majority[equivalent]@3",  # letters: the same as majority@3
        "data",
        "judge",
    }
    # disagreements: rs1 g2 (judge yes), g3 (judge no), rs2 g2 (judge yes); every judge text held a verdict
    want = {"samples": 18, "disagree": 3, "judge_yes_grader_no": 2, "judge_no_grader_yes": 1, "unparsed": 0}
    assert metrics["geometry"]["judge"] == want
    assert "judge and grader disagree on 3 of 18 samples (judge yes/grader no: 2, judge no/grader yes: 1)" in out.stdout
    assert "judge wrote no verdict" not in out.stdout and "judge and grader" not in out.stdout.split("- geometry -")[0]
    # the rows each benchmark ran on (those of its data file); a user's benchmark, so no pin to compare with
    algebra_data = Fingerprint.of_file(results / "eval-results" / "algebra" / "output.jsonl")
    assert metrics["algebra"]["data"] == {"rows": 5, "fingerprint": algebra_data.digest, "pinned": None}
    assert f"data: 5 rows, fingerprint {algebra_data.digest[:12]}" in out.stdout
    assert metrics["geometry"]["majority[equivalent]@3"] == metrics["geometry"]["majority@3"]
    for key, want in ALGEBRA.items():
        check(metrics["algebra"][key], want)
    for key, want in GEOMETRY.items():
        check(metrics["geometry"][key], want)
    assert "judge_correct" not in metrics["algebra"]["pass@4"]

    # the tables show greedy and the k = n rows, values as the hand-made numbers above
    lines = [" ".join(line.replace("|", " ").split()) for line in out.stdout.splitlines()]
    assert "evaluation_mode num_entries avg_tokens gen_seconds symbolic_correct no_answer" in lines
    assert "greedy 5 70 0.70 60.00% 20.00%" in lines
    assert "pass@1[avg-of-4] 5 270 2.70 40.00% ± 16.33 20.00%" in lines  # sqrt(800/3) = 16.33
    assert "majority@4 5 270 2.70 40.00% 0.00%" in lines
    # p5: 1/2 and 0.5 are one answer (2 votes, first seen) against 1/3 (2 votes): correct; p2 stays a 4-vs-5 tie
    assert "majority[equivalent]@4 5 270 2.70 60.00% 0.00%" in lines
    assert "pass@4 5 270 2.70 80.00% 0.00%" in lines
    geo_header = "evaluation_mode num_entries avg_tokens gen_seconds symbolic_correct judge_correct both_correct"
    assert geo_header + " any_correct no_answer" in lines
    # symbolic 8/18 = 44.44 ± 100/sqrt(27) = 19.25; judge 9/18 = 50.00 ± 16.67; both 7/18 = 38.89 ± 25.46;
    # any 10/18 = 55.56 ± 9.62; no answer 4/18 = 22.22
    assert "pass@1[avg-of-3] 6 200 2.00 44.44% ± 19.25 50.00% ± 16.67 38.89% ± 25.46 55.56% ± 9.62 22.22%" in lines
    assert "majority@3 6 200 2.00 50.00% 50.00% 33.33% 66.67% 16.67%" in lines
    assert "pass@3 6 200 2.00 66.67% 83.33% 66.67% 83.33% 16.67%" in lines
    assert out.stderr == f"kit summarize: wrote the metrics to {results / 'metrics.json'}\n"  # stdout: the tables
    again = run_kit("summarize", str(results), cwd=tmp_path)
    assert again.stderr == f"kit summarize: wrote the metrics to {results / 'metrics.json'} (replacing the one there)\n"
    assert again.stdout == out.stdout


def test_no_answer_never_exceeds_100(tmp_path: Path):
    bench = tmp_path / "nothing"
    bench.mkdir()
    for seed in range(3):
        rows = [{"id": i, "expected_answer": "1", "generation": "", "num_generated_tokens": 1, "generation_time": 0.1,
                 "predicted_answer": None, "symbolic_correct": False} for i in range(4)]  # fmt: skip
        (bench / f"output-rs{seed}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["summarize", str(bench)]) == 0
    metrics = json.loads((bench / "metrics.json").read_text())["nothing"]
    modes = {key: values for key, values in metrics.items() if key != "data"}
    assert {key: values["no_answer"] for key, values in modes.items()} == {key: 100.0 for key in modes}
    golden = copy_results(tmp_path)
    assert main(["summarize", str(golden)]) == 0
    for bench_metrics in json.loads((golden / "metrics.json").read_text()).values():
        modes = {key: values for key, values in bench_metrics.items() if key not in NON_MODE_KEYS}
        assert all(0 <= values["no_answer"] <= 100 for values in modes.values())


@pytest.mark.parametrize("layout", ["eval-results", "benchmark folders", "one benchmark"])
def test_layouts(tmp_path: Path, layout: str, capsys):
    src = DATA / "eval-results"
    root = tmp_path / "run"
    if layout == "eval-results":
        shutil.copytree(src, root / "eval-results")
    elif layout == "benchmark folders":
        shutil.copytree(src, root)
    else:
        root = tmp_path / "geometry"
        shutil.copytree(src / "geometry", root)
    assert main(["summarize", str(root), "--save_metrics_path", str(tmp_path / "m.json")]) == 0
    metrics = json.loads((tmp_path / "m.json").read_text())
    assert list(metrics) == (["geometry"] if layout == "one benchmark" else ["algebra", "geometry"])
    check(metrics["geometry"]["majority@3"], GEOMETRY["majority@3"])
    assert not (root / "metrics.json").exists()


def test_greedy_only(tmp_path: Path, capsys):
    root = tmp_path / "algebra"
    root.mkdir()
    shutil.copy(DATA / "eval-results" / "algebra" / "output.jsonl", root)
    assert main(["summarize", str(root)]) == 0
    rows = [line.split(" | ")[0].strip() for line in capsys.readouterr().out.splitlines() if " | " in line]
    assert rows == ["evaluation_mode", "greedy"]
    assert list(json.loads((root / "metrics.json").read_text())["algebra"]) == ["greedy", "data"]


def test_ids_mismatch_is_one_line_error(tmp_path: Path):
    results = copy_results(tmp_path)
    geo = results / "eval-results" / "geometry"
    lines = (geo / "output-rs10.jsonl").read_text().splitlines(keepends=True)
    (geo / "output-rs10.jsonl").write_text("".join(lines[:4] + [lines[5].replace('"g6"', '"g7"')]))  # g5 gone, g6->g7
    out = run_kit("summarize", str(results), cwd=tmp_path)
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and out.stderr.startswith("kit: error: "), out.stderr
    assert str(geo / "output-rs1.jsonl") in out.stderr and str(geo / "output-rs10.jsonl") in out.stderr
    assert "id 'g5'" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize(
    "content, expected",
    [
        ('{"id": 1, "predicted_answer": "1"\n', ["output-rs0.jsonl:1", "not valid JSON"]),
        (
            '{"id": 1, "symbolic_correct": true, "generation_time": 1}\n',
            ["output-rs0.jsonl:1", "no 'predicted_answer'", "--regrade"],
        ),
        (
            '{"id": 1, "predicted_answer": "1", "symbolic_correct": true, "num_generated_tokens": "many"}\n',
            ["output-rs0.jsonl:1", "must be numbers", "'many'"],
        ),
        (
            '{"id": 1, "predicted_answer": "1", "symbolic_correct": "yes", "num_generated_tokens": 1, '
            '"generation_time": 1}\n',
            ["output-rs0.jsonl:1", "symbolic_correct must be true or false", "'yes'"],
        ),
        (
            '{"id": 1, "predicted_answer": "1", "symbolic_correct": true, "num_generated_tokens": 1, '
            '"generation_time": 1}\n' * 2,
            ["output-rs0.jsonl:2", "repeats id 1"],
        ),
        ("", ["output-rs0.jsonl holds no records"]),
    ],
    ids=["bad json", "missing key", "stat not a number", "not a bool", "duplicate id", "empty"],
)
def test_bad_records(tmp_path: Path, capsys, content: str, expected: list[str]):
    bench = tmp_path / "b"
    bench.mkdir()
    (bench / "output-rs0.jsonl").write_text(content)
    assert main(["summarize", str(bench)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    for text in expected:
        assert text in err


def test_no_outputs_names_the_layouts(tmp_path: Path, capsys):
    (tmp_path / "empty" / "bench").mkdir(parents=True)
    (tmp_path / "empty" / "bench" / "notes.jsonl").write_text("{}\n")
    assert main(["summarize", str(tmp_path / "empty")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "eval-results/<benchmark>/output*.jsonl" in err
    (tmp_path / "empty" / "bench" / "output-rs0_chunk_1.jsonl").write_text("{}\n")  # a run not finished yet
    assert main(["summarize", str(tmp_path / "empty")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is finished yet: bench: seed 0 (chunk or in-progress files, no merged" in err
    assert not (tmp_path / "empty" / "metrics.json").exists()
    assert main(["summarize", str(tmp_path / "missing")]) == 2
    assert "is not a folder" in capsys.readouterr().err


def test_unfinished_outputs_are_named_under_the_table_and_in_the_metrics(tmp_path: Path, capsys):
    """A run stopped before every output was merged (killed, a failed unit): its table covers the finished seeds
    only, and says so, instead of passing for a run of fewer seeds."""
    results = tmp_path / "run" / "eval-results"
    shutil.copytree(DATA / "eval-results" / "algebra", results / "algebra")
    algebra = results / "algebra"
    (algebra / "output-rs4_chunk_0.jsonl").unlink()
    for name in ("output-rs2.jsonl", "output-rs3.jsonl", "output.jsonl"):
        (algebra / name).unlink()
    (algebra / "output-rs2_chunk_1.jsonl.in-progress").write_text("")  # a chunk under way
    (algebra / "output-rs2_chunk_0.jsonl").write_text("{}\n")  # a chunk done, its sibling not yet
    (algebra / "output-rs3.jsonl-async").write_text("")  # an unchunked output under way (NeMo-Skills' name)
    (algebra / "output_chunk_0.jsonl.in-progress").write_text("")  # the greedy output's chunk
    (algebra / "output-rs0.jsonl.in-progress").write_text("")  # a rerun of a finished output: it is still there
    # what the last run planned (kit writes it at submission): seeds 4 and 5 have not started, so they have no file
    plan = ["output.jsonl", *(f"output-rs{seed}.jsonl" for seed in range(6)), "notes.txt"]
    (algebra / ".kit-plan.json").write_text(json.dumps({"outputs": plan}))
    (results / "late").mkdir()
    (results / "late" / "output-rs0_chunk_0.jsonl.in-progress").write_text("")  # nothing finished at all
    (results / "late" / ".kit-plan.json").write_text("{not json")  # a plan that cannot be read is no plan
    assert main(["summarize", str(results.parent)]) == 0
    out, err = capsys.readouterr()
    want = "unfinished: the greedy output and seeds 2-3 (chunk or in-progress files, no merged output) and seeds 4-5"
    assert want + " (planned by the last run, not started), left out of this table" in out
    assert "pass@1[avg-of-2]" in out and "greedy" not in out.split("graded by")[0]
    assert err.splitlines()[0] == (
        "kit: warning: late has no table, nothing in it is finished yet: seed 0 (chunk or in-progress files, no merged "
        "output); run the same command again to finish it."
    )
    metrics = json.loads((results.parent / "metrics.json").read_text())
    assert list(metrics) == ["algebra"]
    pending = ["output.jsonl", *(f"output-rs{seed}.jsonl" for seed in (2, 3, 4, 5))]
    assert metrics["algebra"]["unfinished"] == pending
    check(metrics["algebra"]["pass@1[avg-of-2]"], ALGEBRA["pass@1[avg-of-2]"])


def test_audit_counts(tmp_path: Path, capsys):
    results = copy_results(tmp_path)
    assert main(["summarize", str(results), "--audit"]) == 0
    out = capsys.readouterr().out
    # algebra: no answer in greedy p3, rs0 p3, rs1 p3, rs3 p3, rs3 p4 = 5; timeout rs2 p4 = 1; no judge
    assert "audit of algebra: 25 samples in 5 files" in out
    assert "extraction failed (no predicted_answer): 5 samples, e.g. p3 (output.jsonl), p3 (output-rs0.jsonl)," in out
    assert "grading timed out: 1 sample, e.g. p4 (output-rs2.jsonl)" in out
    assert "grader and judge disagree: no judge ran" in out
    # geometry: no answer rs1 g4, g6, rs2 g6, rs10 g6 = 4; disagreements rs1 g2, g3, rs2 g2 = 3
    assert "audit of geometry: 18 samples in 3 files" in out
    assert "extraction failed (no predicted_answer): 4 samples" in out
    assert "grading timed out: 0 samples" in out
    assert "grader and judge disagree: 3 samples, e.g. g2 (output-rs1.jsonl), g3 (output-rs1.jsonl), g2 (output-rs2.jsonl)" in out  # fmt: skip


def test_plot(tmp_path: Path, monkeypatch, capsys):
    """What the figure shows, read back from the figure object kit saved: a panel per benchmark with its axes'
    labels, pass@k and majority@k at k = 1..n (the hand-derived values above) and the greedy accuracy as a line."""
    import matplotlib.image

    import pipeline_kit.evaluation.summarize as summarize_module

    drawn = []
    save = summarize_module._save_atomic
    monkeypatch.setattr(summarize_module, "_save_atomic", lambda fig, *args: (drawn.append(fig), save(fig, *args)))
    results = copy_results(tmp_path)
    png = tmp_path / "plots" / "passk.png"
    assert main(["summarize", str(results), "--plot", str(png)]) == 0
    (fig,) = drawn
    algebra, geometry = fig.get_axes()
    panels = {
        algebra: {
            "pass@k": [ALGEBRA[f"pass@{k}"]["symbolic_correct"] for k in range(1, 5)],
            "majority@k": [ALGEBRA[f"majority@{k}"]["symbolic_correct"] for k in range(1, 5)],
            "greedy": [ALGEBRA["greedy"]["symbolic_correct"]] * 2,  # a horizontal line: the same y at both ends
        },
        geometry: {
            "pass@k": [GEOMETRY["pass@1[avg-of-3]"]["symbolic_correct"], GEOMETRY["pass@2"]["symbolic_correct"],
                       GEOMETRY["pass@3"]["symbolic_correct"]],
            # majority@1: the first seed's (rs1) 2 of 6
            "majority@k": [2 / 6 * pct, GEOMETRY["majority@2"]["symbolic_correct"],
                           GEOMETRY["majority@3"]["symbolic_correct"]],
        },  # no greedy output: no greedy line
    }  # fmt: skip
    for ax, name in ((algebra, "algebra"), (geometry, "geometry")):
        assert (ax.get_title(), ax.get_xlabel(), ax.get_ylabel()) == (name, "k (samples)", "symbolic_correct (%)")
        lines = {line.get_label(): line for line in ax.get_lines()}
        assert list(lines) == list(panels[ax]) == [t.get_text() for t in ax.get_legend().get_texts()]
        for label, values in panels[ax].items():
            assert list(lines[label].get_ydata()) == pytest.approx(values), (name, label)
        n = len(panels[ax]["pass@k"])
        assert list(lines["pass@k"].get_xdata()) == list(lines["majority@k"].get_xdata()) == list(range(1, n + 1))
    width, height = fig.get_size_inches() * 120  # the saved file is this figure, at kit's 120 dpi
    assert matplotlib.image.imread(png).shape[:2] == (round(height), round(width))
    assert [p.name for p in png.parent.iterdir()] == ["passk.png"]  # no temporary file left
    assert main(["summarize", str(results), "--plot", str(tmp_path / "passk.nope")]) == 2
    assert "'.nope'" in capsys.readouterr().err


def test_ungraded_files_are_graded_first(tmp_path: Path, monkeypatch, capsys):
    bench = tmp_path / "b"
    bench.mkdir()
    rows = [{"id": i, "expected_answer": "3", "generation": f"\\boxed{{{i}}}", "num_generated_tokens": 5,
             "generation_time": 0.5} for i in range(4)]  # fmt: skip
    for seed in (0, 1):
        (bench / f"output-rs{seed}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    calls = []

    def grade_files(paths, extract):  # stands in for pipeline_kit.grading.grade: \\boxed{}'s answer against "3"
        calls.append((sorted(p.name for p in paths), extract))
        for path in paths:
            graded = []
            for line in path.read_text().splitlines():
                rec = json.loads(line)
                rec["predicted_answer"] = rec["generation"][7:-1]
                rec["symbolic_correct"] = rec["predicted_answer"] == rec["expected_answer"]
                graded.append(json.dumps(rec) + "\n")
            path.write_text("".join(graded))

    monkeypatch.setitem(sys.modules, "pipeline_kit.grading.grade", types.SimpleNamespace(grade_files=grade_files))
    assert main(["summarize", str(bench)]) == 0
    assert calls == [(["output-rs0.jsonl", "output-rs1.jsonl"], "boxed")]
    assert json.loads((bench / "metrics.json").read_text())["b"]["pass@2"]["symbolic_correct"] == 25.0  # 1 of 4


def test_ungraded_files_go_through_the_real_grader(tmp_path: Path, capsys):
    bench = tmp_path / "b"
    bench.mkdir()
    for seed in (0, 1):  # seed 0 answers 0, 1, 2, 3 and seed 1 answers 1, 2, 3, 4; the expected answer is 3
        rows = [{"id": i, "expected_answer": "3", "generation": f"so \\boxed{{{i + seed}}}",
                 "num_generated_tokens": 5, "generation_time": 0.5} for i in range(4)]  # fmt: skip
        (bench / f"output-rs{seed}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["summarize", str(bench)]) == 0, capsys.readouterr().err
    assert all("symbolic_correct" in json.loads(line) for line in (bench / "output-rs0.jsonl").read_text().splitlines())
    metrics = json.loads((bench / "metrics.json").read_text())["b"]
    assert metrics["pass@1[avg-of-2]"]["symbolic_correct"] == 25.0  # 1 of 4 in each seed
    assert metrics["pass@2"]["symbolic_correct"] == 50.0  # problem 3 (seed 0) and problem 2 (seed 1)


@pytest.mark.parametrize(("mode", "correct"), [("boxed", 25.0), ("auto", 50.0)])
def test_the_extraction_mode_of_kits_verdicts_is_chosen_and_shown(tmp_path: Path, capsys, mode, correct):
    bench = tmp_path / "b"
    bench.mkdir()
    rows = [{"id": 0, "expected_answer": "3", "generation": "so \\boxed{3}"},
            {"id": 1, "expected_answer": "3", "generation": "The answer is 3."},  # no box: no answer when boxed
            {"id": 2, "expected_answer": "3", "generation": "so \\boxed{4}"},
            {"id": 3, "expected_answer": "3", "generation": "I am not sure."}]  # fmt: skip
    (bench / "output.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["summarize", str(bench), f"--extract={mode}"]) == 0, capsys.readouterr().err
    assert f"graded by: kit; answers extracted: {mode}" in capsys.readouterr().out.splitlines()
    assert json.loads((bench / "metrics.json").read_text())["b"]["greedy"]["symbolic_correct"] == correct


def test_mcq_answers_get_pass_at_k_majority_and_no_answer_as_math_does(tmp_path: Path, capsys):
    bench = tmp_path / "gpqa"
    bench.mkdir()
    replies = {  # problem 0 expects C, problem 1 expects a (any case); seed -> reply
        0: ["the answer is (c)", "\\boxed{B}", "Answer: C", "hmm, no idea"],
        1: ["\\boxed{B}", "Answer: B", "I cannot tell", "The correct option is A."],
    }
    for seed in range(4):
        rows = [{"id": i, "expected_answer": "C" if i == 0 else "a", "generation": replies[i][seed]} for i in (0, 1)]
        (bench / f"output-rs{seed}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["summarize", str(bench), "--extract=mcq"]) == 0, capsys.readouterr().err
    assert "graded by: kit; answers extracted: mcq" in capsys.readouterr().out.splitlines()
    metrics = json.loads((bench / "metrics.json").read_text())["gpqa"]
    assert metrics["pass@1[avg-of-4]"]["symbolic_correct"] == 37.5  # runs: 50, 0, 50, 50
    assert metrics["pass@1[avg-of-4]"]["no_answer"] == 25.0  # 2 of the 8 samples state no letter
    assert metrics["majority@4"]["symbolic_correct"] == 50.0  # C wins problem 0 (2 of 3 votes), B problem 1
    assert metrics["pass@4"]["symbolic_correct"] == 100.0


@pytest.mark.parametrize("n", range(1, 8))
def test_pass_at_k_matches_enumeration(n: int):
    for c in range(n + 1):
        samples = [True] * c + [False] * (n - c)
        for k in range(1, n + 1):
            draws = list(itertools.combinations(samples, k))
            brute = sum(any(draw) for draw in draws) / len(draws)
            assert pass_at_k(n, c, k) == pytest.approx(brute, abs=1e-12), (n, c, k)


def test_majority_tie_goes_to_the_answer_seen_first():
    # one problem, answers A (correct), B, B, A over four runs: after run 3 B leads 2:1; after run 4 it is 2:2 and
    # A, seen first (run 1), wins again. A fifth run without an answer does not vote.
    answers = ["A", "B", "B", "A", None]
    runs = [Run(f"r{i}", {"symbolic_correct": [a == "A"]}, [a], 1.0, 1.0) for i, a in enumerate(answers)]
    metrics = sampled_metrics(runs, ["symbolic_correct"])
    assert [metrics[f"majority@{k}"]["symbolic_correct"] for k in range(1, 6)] == [100.0, 100.0, 0.0, 100.0, 100.0]
    assert all(metrics[f"majority@{k}"]["no_answer"] == 0.0 for k in range(1, 6))


def test_samples_with_an_error_count_as_no_answer_and_are_named(tmp_path: Path, capsys):
    bench = tmp_path / "b"
    bench.mkdir()
    rows = [{"id": i, "expected_answer": "3", "generation": "so \\boxed{3}", "num_generated_tokens": 5,
             "generation_time": 0.5} for i in range(4)]  # fmt: skip
    rows[1] |= {"generation": "", "num_generated_tokens": 0, "error": "HTTP 422: refused"}  # as kit generate writes
    (bench / "output.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["summarize", str(bench)]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "1 sample has an error instead of a generation (counted as no answer); --audit names them" in out
    greedy = json.loads((bench / "metrics.json").read_text())["b"]["greedy"]
    assert (greedy["symbolic_correct"], greedy["no_answer"]) == (75.0, 25.0)
    assert main(["summarize", str(bench), "--audit"]) == 0
    audit = capsys.readouterr().out
    failed = "generation failed (an error field: a refused request or a prompt over the context length)"
    assert f"{failed}: 1 sample, e.g. 1 (output.jsonl)" in audit
    assert "extraction failed (no predicted_answer): 1 sample, e.g. 1 (output.jsonl)" in audit


def test_regrade_writes_beside_the_labels_metrics_never_over_them(tmp_path: Path, capsys):
    """--regrade's metrics go to metrics-regraded.json; the labels' metrics.json is never replaced, even when
    --save_metrics_path names it; stderr names the file written each time."""
    bench = tmp_path / "b"
    bench.mkdir()
    rows = [{"id": i, "expected_answer": "3", "generation": f"\\boxed{{{i}}}", "predicted_answer": str(i),
             "symbolic_correct": True} for i in range(4)]  # fmt: skip
    (bench / "output-rs0.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))  # another tool's labels
    labels_file, regraded_file = bench / "metrics.json", bench / "metrics-regraded.json"

    def correct(path: Path) -> float:
        return json.loads(path.read_text())["b"]["pass@1[avg-of-1]"]["symbolic_correct"]

    assert main(["summarize", str(bench)]) == 0
    assert capsys.readouterr().err == f"kit summarize: wrote the metrics to {labels_file}\n"
    labels = labels_file.read_bytes()
    assert correct(labels_file) == 100.0  # the labels, as given
    assert main(["summarize", str(bench), "--regrade"]) == 0
    assert capsys.readouterr().err == f"kit summarize: wrote the regraded metrics to {regraded_file}\n"
    assert correct(regraded_file) == 25.0  # kit's grader: only "3" is right
    assert labels_file.read_bytes() == labels
    assert main(["summarize", str(bench), "--regrade"]) == 0
    assert capsys.readouterr().err.endswith(f"to {regraded_file} (replacing the one there)\n")

    regraded_file.unlink()
    assert main(["summarize", str(bench), "--regrade", "--save_metrics_path", str(labels_file)]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "--regrade" in err and str(labels_file) in err, err
    assert "Traceback" not in err and "drop --save_metrics_path" in err
    assert labels_file.read_bytes() == labels and not regraded_file.exists()  # nothing written
    elsewhere = tmp_path / "mine.json"
    assert main(["summarize", str(bench), "--regrade", "--save_metrics_path", str(elsewhere)]) == 0
    assert capsys.readouterr().err == f"kit summarize: wrote the regraded metrics to {elsewhere}\n"
    assert correct(elsewhere) == 25.0 and labels_file.read_bytes() == labels


def test_the_data_under_each_table_and_files_that_ran_on_other_rows(tmp_path: Path):
    """Under each table: the rows the results ran on (count, fingerprint) and whether they are the data kit pins for a
    shipped benchmark; seeds of one benchmark that ran on different rows get a warning naming both files."""
    from pipeline_kit.benchmarks import get_benchmark

    arith = get_benchmark("arith").generate()
    bench = tmp_path / "eval-results" / "arith"
    bench.mkdir(parents=True)

    def write(name: str, records: list[dict]) -> None:
        lines = [
            json.dumps({**r, "generation": "", "predicted_answer": r["expected_answer"], "symbolic_correct": True})
            for r in records
        ]
        (bench / name).write_text("\n".join(lines) + "\n")

    write("output-rs0.jsonl", arith)
    write("output-rs1.jsonl", list(reversed(arith)))  # the order of rows does not matter
    assert main(["summarize", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "metrics.json").read_text())["arith"]["data"]
    pinned = get_benchmark("arith").fingerprint
    assert data["rows"] == 50 and data["fingerprint"].startswith(pinned) and data["pinned"] is True

    edited = [dict(r) for r in arith]
    edited[3]["expected_answer"] = "99"  # one answer changed: other data, and not kit's
    write("output-rs0.jsonl", edited)
    write("output-rs1.jsonl", edited)
    out = run_kit("summarize", str(tmp_path), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    other = Fingerprint.of_records(edited)
    assert f"data: 50 rows, fingerprint {other.short} (not kit's pinned arith: 50 rows, {pinned[:12]})" in out.stdout

    write("output-rs1.jsonl", arith)
    out = run_kit("summarize", str(tmp_path), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert (
        f"warning: arith's files ran on different data: output-rs0.jsonl on 50 rows, fingerprint {other.short}, "
        f"output-rs1.jsonl on 50 rows, fingerprint {pinned[:12]}"
    ) in out.stdout
    assert json.loads((tmp_path / "metrics.json").read_text())["arith"]["data"]["differs"] == [
        "output-rs0.jsonl",
        "output-rs1.jsonl",
    ]


def test_a_judge_output_without_a_verdict_is_counted_apart_not_as_a_no(tmp_path: Path, capsys):
    """The judge stage's outputs beside a results file: a generation with no "Judgement:" line is unparsed, which
    judge_correct counts as not correct, but summarize counts apart (never a disagreement, never a "no")."""
    bench = tmp_path / "arith"
    (bench / "judge-rs0").mkdir(parents=True)
    # (grader's verdict, judge's text): q0 agree yes, q1 judge yes/grader no, q2 judge no/grader yes, q3 unparsed
    cases = [(True, "Judgement: Yes"), (False, "Judgement: Yes"), (True, "Judgement: No"), (True, "7 is 7.")]
    rows = [{"id": f"q{i}", "expected_answer": "7", "predicted_answer": "7", "symbolic_correct": ok}
            for i, (ok, _) in enumerate(cases)]  # fmt: skip
    (bench / "output-rs0.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    judged = [{"id": f"q{i}", "generation": text} for i, (_, text) in enumerate(cases)]
    (bench / "judge-rs0" / "output.jsonl").write_text("".join(json.dumps(r) + "\n" for r in judged))
    (bench / "judge-rs0" / "output.jsonl.done").write_text("{}\n")
    assert main(["summarize", str(bench)]) == 0
    out = capsys.readouterr().out
    metrics = json.loads((bench / "metrics.json").read_text())["arith"]
    assert metrics["pass@1"]["judge_correct"] == 50.0  # q0, q1: the unparsed q3 is not correct
    assert metrics["judge"] == {"samples": 4, "disagree": 2, "judge_yes_grader_no": 1, "judge_no_grader_yes": 1,
                                "unparsed": 1}  # fmt: skip
    assert "judge and grader disagree on 2 of 4 samples (judge yes/grader no: 1, judge no/grader yes: 1)" in out
    assert "judge wrote no verdict for 1 sample (unparsed: counted as not correct in judge_correct" in out
    assert main(["summarize", str(bench), "--audit"]) == 0
    out = capsys.readouterr().out
    assert "judge wrote no verdict (counted as not correct): 1 sample, e.g. q3 (output-rs0.jsonl)" in out
    assert "grader and judge disagree: 2 samples, e.g. q1 (output-rs0.jsonl), q2 (output-rs0.jsonl)" in out
