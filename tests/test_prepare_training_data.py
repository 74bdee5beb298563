"""`kit prepare_sft_data` and `kit prepare_rl_data` on small hand-made folders: each filter counted exactly,
n-gram decontamination against a prepared `arith` (and its report), weights, the length cap, RL data, bad input.
Runs in-process through the CLI entry point (pipeline_kit.cli.main); no services."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline_kit.cli.main import main
from pipeline_kit.training.data import ngrams, words

LONG = "Let us add carefully. " * 20 + "\\boxed{9}"  # 440 characters


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def rec(rid: str, problem: str, generation: str, correct: bool | None, answer: str = "1") -> dict:
    out = {"id": rid, "problem": problem, "expected_answer": answer, "generation": generation}
    if correct is not None:
        out |= {"predicted_answer": answer if correct else "0", "symbolic_correct": correct}
    return out


def kit(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def summary_row(text: str, source: str) -> list[str]:
    return next(line.split()[1:] for line in text.splitlines() if line.startswith(source + " "))


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    """A data_dir with `arith` prepared in it (kit prepare_data arith --data_dir=...)."""
    d = tmp_path_factory.mktemp("benchmarks")
    assert main(["prepare_data", "arith", f"--data_dir={d}"]) == 0
    assert (d / "arith" / "test.jsonl").is_file()
    return d


# ---- the hand-made results folder
#   output-rs0.jsonl  s1 correct, s2 incorrect, s3 correct but copied from arith ("What is 3+4?"),
#                     s4 correct, 440-character generation (too long for --max_length=100)
#   output-rs1.jsonl  s1 again (same problem and generation: a duplicate), s5 correct ("What is 3+4+5?": not arith)
#   output-rs2.jsonl  not graded: s6 with the right boxed answer, s7 with a wrong one (graded in place first)
#   output-rs0_chunk_0.jsonl and output.jsonl.done: not outputs, never read
# read 8, correct 6 (s1, s3, s4, s1, s5, s6), duplicate 1, too long 1, contaminated 1, kept 3 (s1, s5, s6)


def results_folder(root: Path) -> Path:
    write_jsonl(
        root / "output-rs0.jsonl",
        [
            rec("s1", "Find the sum of the first three positive odd numbers.", "1+3+5 = \\boxed{9}", True, "9"),
            rec("s2", "How many sides does a hexagon have in total?", "\\boxed{5}", False, "6"),
            rec("s3", "What is 3+4?", "\\boxed{7}", True, "7"),
            rec("s4", "Add nine and zero, then report the result.", LONG, True, "9"),
        ],
    )
    write_jsonl(
        root / "output-rs1.jsonl",
        [
            rec("s1", "Find the sum of the first three positive odd numbers.", "1+3+5 = \\boxed{9}", True, "9"),
            rec("s5", "What is 3+4+5?", "\\boxed{12}", True, "12"),
        ],
    )
    write_jsonl(
        root / "output-rs2.jsonl",
        [
            rec("s6", "What is twice three?", "2*3 = \\boxed{6}", None, "6"),
            rec("s7", "What is twice four?", "2*4 = \\boxed{9}", None, "8"),
        ],
    )
    write_jsonl(root / "output-rs0_chunk_0.jsonl", [rec("chunk", "never read", "x", True)])
    (root / "output.jsonl.done").write_text("")
    return root


def test_sft_filters_counted_exactly_and_decontamination_report(capsys, tmp_path: Path, data_dir: Path):
    src = results_folder(tmp_path / "run")
    out = tmp_path / "sft.jsonl"
    code, stdout, stderr = kit(
        capsys,
        "prepare_sft_data",
        f"--input_dir={src}",
        f"--output_file={out}",
        "--max_length=100",
        "--decontaminate=arith",
        f"--data_dir={data_dir}",
    )
    assert code == 0, stderr
    assert stdout.splitlines()[0].split() == [
        "source",
        "read",
        "correct",
        "unfinished",
        "duplicate",
        "too_long",
        "contaminated",
        "kept",
        "weight",
    ]
    assert summary_row(stdout, str(src)) == ["8", "6", "0", "1", "1", "1", "3", "1"]
    records = read_jsonl(out)
    assert sorted(r["id"] for r in records) == ["s1", "s5", "s6"]
    assert all(set(r) == {"problem", "generation", "expected_answer", "id", "source"} for r in records)
    assert {r["source"] for r in records} == {str(src)}
    # the ungraded file was graded in place first
    assert [r["symbolic_correct"] for r in read_jsonl(src / "output-rs2.jsonl")] == [True, False]
    report = json.loads(Path(f"{out}.decontamination.json").read_text())
    assert report["ngram"] == 13 and report["checked"] == ["arith"] and report["not_prepared"] == []
    assert report["dropped"] == [
        {
            "id": "s3",
            "source": str(src),
            "problem": "What is 3+4?",
            "benchmark": "arith",
            "benchmark_id": "arith-0",
            "ngram": "what is 3 4",
        }
    ]
    assert "1 problems dropped" in stdout


def test_a_split_reasoning_trace_is_kept_or_dropped_and_an_unfinished_one_left_out(capsys, tmp_path: Path):
    """Samples that `kit generate ++parse_reasoning=True` split: --reasoning=keep (the default) trains on <think>,
    the trace, the end string and the answer; drop on the answer alone; a trace that never reached its end (no
    answer: graded incorrect) is left out even with --keep_incorrect, and counted."""
    thought = {"reasoning_content": "2+2 is 4.", "finished_reasoning": True}
    cut = {"reasoning_content": "2+2 is", "finished_reasoning": False}
    src = tmp_path / "run"
    write_jsonl(
        src / "output.jsonl",
        [rec("r1", "What is 2+2?", "\n\\boxed{4}", True, "4") | thought, rec("r2", "What is 1+1?", "", False) | cut],
    )
    outputs = {}
    for mode in ("keep", "drop"):
        out = tmp_path / f"{mode}.jsonl"
        args = [f"--input_dir={src}", f"--output_file={out}", "--no_decontaminate", "--keep_incorrect"]
        code, stdout, stderr = kit(capsys, "prepare_sft_data", *args, f"--reasoning={mode}")
        assert code == 0, stderr
        assert summary_row(stdout, str(src))[:3] == ["2", "2", "1"]  # read, correct (kept incorrect), unfinished
        outputs[mode] = [r["generation"] for r in read_jsonl(out)]
    assert outputs == {"keep": ["<think>2+2 is 4.</think>\n\\boxed{4}"], "drop": ["\n\\boxed{4}"]}
    # a model whose chat template writes <think> into the prompt (DeepSeek-R1) trains on the trace as it writes it
    args = [f"--input_dir={src}", f"--output_file={out}", "--no_decontaminate", "--start_reasoning_string="]
    assert kit(capsys, "prepare_sft_data", *args)[0] == 0
    assert [r["generation"] for r in read_jsonl(out)] == ["2+2 is 4.</think>\n\\boxed{4}"]
    code, _, stderr = kit(capsys, "prepare_sft_data", f"--input_dir={src}", f"--output_file={out}", "--reasoning=no")
    assert code == 2 and "--reasoning=no: use one of keep, drop." in stderr


def test_keep_incorrect_no_dedupe_no_decontaminate(capsys, tmp_path: Path):
    src = results_folder(tmp_path / "run")
    out = tmp_path / "sft.jsonl"
    code, stdout, stderr = kit(
        capsys,
        "prepare_sft_data",
        f"--input_dir={src}",
        f"--output_file={out}",
        "--keep_incorrect",
        "--no_dedupe",
        "--no_decontaminate",
    )
    assert code == 0, stderr
    assert summary_row(stdout, str(src)) == ["8", "8", "0", "0", "0", "0", "8", "1"]
    assert len(read_jsonl(out)) == 8
    assert not Path(f"{out}.decontamination.json").exists()
    # with --keep_incorrect nothing needs a grade: the ungraded file is left as it was
    assert "symbolic_correct" not in read_jsonl(src / "output-rs2.jsonl")[0]


def test_length_cap_counts_the_longer_ones(capsys, tmp_path: Path):
    gens = ["x" * 10, "x" * 50, "x" * 51, "x" * 400]
    src = tmp_path / "run"
    write_jsonl(src / "output.jsonl", [rec(f"p{i}", f"problem number {i}", g, True) for i, g in enumerate(gens)])
    out = tmp_path / "sft.jsonl"
    code, stdout, _ = kit(
        capsys,
        "prepare_sft_data",
        f"--input_dir={src}",
        f"--output_file={out}",
        "--max_length=50",
        "--no_decontaminate",
    )
    assert code == 0
    assert summary_row(stdout, str(src)) == ["4", "4", "0", "0", "2", "0", "2", "1"]
    assert sorted(r["id"] for r in read_jsonl(out)) == ["p0", "p1"]


def test_ngram_overlap_in_a_longer_problem(capsys, tmp_path: Path, data_dir: Path):
    src = tmp_path / "run"
    write_jsonl(
        src / "output.jsonl",
        [
            rec("long", "Tell me please: what is 3+4? Answer quickly.", "\\boxed{7}", True),
            rec("other", "Tell me please: how many legs has a cat?", "\\boxed{4}", True),
        ],
    )
    out = tmp_path / "sft.jsonl"
    args = ["prepare_sft_data", f"--input_dir={src}", f"--output_file={out}", "--decontaminate=arith"]
    code, _, stderr = kit(capsys, *args, "--ngram=3", f"--data_dir={data_dir}")
    assert code == 0, stderr
    assert [r["id"] for r in read_jsonl(out)] == ["other"]
    (dropped,) = json.loads(Path(f"{out}.decontamination.json").read_text())["dropped"]
    assert (dropped["id"], dropped["ngram"], dropped["benchmark_id"]) == ("long", "what is 3", "arith-0")
    # at 13-grams both are longer than arith's problems and share no 13 words with them: both kept
    code, _, _ = kit(capsys, *args, f"--data_dir={data_dir}")
    assert code == 0 and len(read_jsonl(out)) == 2


def test_weights_halve_and_double(capsys, tmp_path: Path):
    a = write_jsonl(tmp_path / "a" / "output.jsonl", [rec(f"a{i}", f"alpha {i}", "g", True) for i in range(4)]).parent
    b = write_jsonl(tmp_path / "b" / "output.jsonl", [rec(f"b{i}", f"beta {i}", "g", True) for i in range(3)]).parent
    out = tmp_path / "mix.jsonl"
    args = ["prepare_sft_data", f"--input_dir={a}", f"--input_dir={b}", f"--output_file={out}", "--no_decontaminate"]
    code, stdout, stderr = kit(capsys, *args, "--weights=0.5,2", "--seed=3")
    assert code == 0, stderr
    assert summary_row(stdout, str(a))[-2:] == ["2", "0.5"]
    assert summary_row(stdout, str(b))[-2:] == ["6", "2"]
    first = read_jsonl(out)
    ids = [r["id"] for r in first]
    assert len([i for i in ids if i.startswith("a")]) == 2 and len(set(i for i in ids if i.startswith("a"))) == 2
    assert sorted(i for i in ids if i.startswith("b")) == ["b0", "b0", "b1", "b1", "b2", "b2"]
    assert {r["source"] for r in first} == {str(a), str(b)}
    code, _, _ = kit(capsys, *args, "--weights=0.5,2", "--seed=3")
    assert read_jsonl(out) == first  # the same seed gives the same file


def test_not_prepared_benchmark_is_skipped_with_a_warning(capsys, tmp_path: Path, data_dir: Path):
    records = [rec("x", "What is 3+4?", "\\boxed{7}", True), rec("y", "Name a prime.", "\\boxed{2}", True)]
    src = write_jsonl(tmp_path / "run" / "output.jsonl", records).parent
    out = tmp_path / "sft.jsonl"
    code, _, stderr = kit(
        capsys,
        "prepare_sft_data",
        f"--input_dir={src}",
        f"--output_file={out}",
        "--decontaminate=arith,math500",
        f"--data_dir={data_dir}",
    )
    assert code == 0
    assert stderr.count("\n") == 1 and stderr.startswith("kit: warning:")
    assert f"kit prepare_data math500 --data_dir {data_dir}" in stderr
    report = json.loads(Path(f"{out}.decontamination.json").read_text())
    assert report["checked"] == ["arith"] and report["not_prepared"] == ["math500"]
    assert [r["id"] for r in read_jsonl(out)] == ["y"]


def test_nothing_left_to_write_is_one_line_naming_the_filters_and_writes_nothing(capsys, tmp_path: Path, data_dir):
    """Training on a benchmark's own outputs (every problem contaminated), or on outputs none of which is correct,
    leaves no record: that is an error naming why, not an empty file that fails the training job later."""
    out = tmp_path / "sft.jsonl"
    ours = [rec(f"r{i}", "What is 3+4?", "\\boxed{7}", True) for i in range(2)]  # one pair, twice
    src = write_jsonl(tmp_path / "bench" / "output.jsonl", ours).parent
    args = ["prepare_sft_data", f"--input_dir={src}", f"--output_file={out}", f"--data_dir={data_dir}"]
    code, _, stderr = kit(capsys, *args, "--decontaminate=arith")
    assert code == 2 and stderr.count("\n") == 1, stderr
    assert stderr.startswith(f"kit: error: nothing to write to {out}: of 2 records read, 1 contaminated, 1 repeated")
    assert "leave those benchmarks out of --decontaminate (matched: arith)." in stderr
    assert not out.exists() and not Path(f"{out}.decontamination.json").exists()

    wrong = write_jsonl(tmp_path / "wrong" / "output.jsonl", [rec("w", "Name a prime.", "\\boxed{4}", False)]).parent
    code, _, stderr = kit(
        capsys, "prepare_sft_data", f"--input_dir={wrong}", f"--output_file={out}", "--no_decontaminate"
    )
    assert code == 2 and "of 1 records read, 1 not graded correct were dropped" in stderr, stderr
    assert "pass --keep_incorrect to keep them." in stderr and not out.exists()

    problems = write_jsonl(tmp_path / "rl.jsonl", [{"problem": "What is 3+4?", "expected_answer": "7"}])
    rl = ["prepare_rl_data", f"--input_file={problems}", f"--output_file={out}", "--decontaminate=arith"]
    code, _, stderr = kit(capsys, *rl, f"--data_dir={data_dir}", "--ngram=3")
    assert code == 2 and "of 1 records read, 1 contaminated were dropped and none kept" in stderr, stderr
    assert not out.exists()


def test_rl_data(capsys, tmp_path: Path, data_dir: Path):
    src = write_jsonl(
        tmp_path / "problems.jsonl",
        [
            {"id": "r1", "problem": "What is 3+4?", "expected_answer": "7", "extra": 1},
            {"problem": "What is 3+4+5?", "expected_answer": 12},
            {"id": "r3", "problem": "Name the smallest prime number.", "expected_answer": "2"},
        ],
    )
    out = tmp_path / "rl.jsonl"
    args = ["prepare_rl_data", f"--input_file={src}", f"--output_file={out}", "--decontaminate=arith"]
    code, stdout, stderr = kit(capsys, *args, f"--data_dir={data_dir}")
    assert code == 0, stderr
    assert summary_row(stdout, str(src)) == ["3", "1", "2"]
    assert read_jsonl(out) == [
        {"id": "problems-2", "problem": "What is 3+4+5?", "expected_answer": 12},
        {"id": "r3", "problem": "Name the smallest prime number.", "expected_answer": "2"},
    ]
    (dropped,) = json.loads(Path(f"{out}.decontamination.json").read_text())["dropped"]
    assert (dropped["id"], dropped["benchmark"], dropped["ngram"]) == ("r1", "arith", "what is 3 4")


def test_words_and_ngrams():
    assert words("What is 3+4?  (Answer, please.)") == ["what", "is", "3", "4", "answer", "please"]
    assert ngrams("a b", 3) == [("a", "b")]
    assert ngrams("a b c d", 3) == [("a", "b", "c"), ("b", "c", "d")]
    assert ngrams("?!", 3) == []


@pytest.mark.parametrize(
    "case, needle",
    [
        ("rl_missing_answer", "problems.jsonl:2: record has no 'expected_answer'"),
        ("rl_missing_file", "--input_file"),
        ("sft_missing_dir", "no_such_dir: no such folder"),
        ("sft_empty_dir", "no output*.jsonl files"),
        ("sft_missing_generation", "output.jsonl:1: record has no 'generation'"),
        ("sft_bad_json", "output.jsonl:2: not valid JSON"),
        ("unknown_benchmark", "unknown benchmark 'arihm'. Did you mean 'arith'?"),
        ("both_decontaminate_flags", "contradict each other"),
        ("weights_count", "--weights=1 has 1 numbers for 2 --input_dir folders"),
        ("weights_value", "'x' is not a number >= 0"),
        ("bad_max_length", "--max_length=0"),
        ("bad_ngram", "--ngram=0"),
    ],
)
def test_bad_input_is_one_line(capsys, tmp_path: Path, case: str, needle: str):
    good = write_jsonl(tmp_path / "good" / "output.jsonl", [rec("g", "a problem", "\\boxed{1}", True)]).parent
    out = f"--output_file={tmp_path / 'out.jsonl'}"
    sft = ["prepare_sft_data", f"--input_dir={good}", out, "--no_decontaminate"]
    if case == "rl_missing_answer":
        path = write_jsonl(
            tmp_path / "problems.jsonl", [{"problem": "p", "expected_answer": "1"}, {"id": "q", "problem": "q"}]
        )
        args = ["prepare_rl_data", f"--input_file={path}", out, "--no_decontaminate"]
    elif case == "rl_missing_file":
        args = ["prepare_rl_data", f"--input_file={tmp_path / 'nope.jsonl'}", out]
    elif case == "sft_missing_dir":
        args = ["prepare_sft_data", f"--input_dir={tmp_path / 'no_such_dir'}", out]
    elif case == "sft_empty_dir":
        (tmp_path / "empty").mkdir()
        args = ["prepare_sft_data", f"--input_dir={tmp_path / 'empty'}", out]
    elif case == "sft_missing_generation":
        write_jsonl(tmp_path / "bad" / "output.jsonl", [{"id": "b", "problem": "p", "symbolic_correct": True}])
        args = ["prepare_sft_data", f"--input_dir={tmp_path / 'bad'}", out, "--no_decontaminate"]
    elif case == "sft_bad_json":
        (good / "output.jsonl").write_text(json.dumps(rec("g", "p", "g", True)) + "\n{oops\n")
        args = sft
    elif case == "unknown_benchmark":
        args = ["prepare_sft_data", f"--input_dir={good}", out, "--decontaminate=arihm"]
    elif case == "both_decontaminate_flags":
        args = [*sft, "--decontaminate=arith"]
    elif case == "weights_count":
        args = [*sft, f"--input_dir={good}", "--weights=1"]
    elif case == "weights_value":
        args = [*sft, "--weights=x"]
    elif case == "bad_max_length":
        args = [*sft, "--max_length=0"]
    else:
        args = [*sft, "--ngram=0"]
    code, stdout, stderr = kit(capsys, *args)
    assert code == 2
    assert stderr.startswith("kit: error:") and stderr.count("\n") == 1 and "Traceback" not in stderr, stderr
    assert needle in stderr
    assert not (tmp_path / "out.jsonl").exists()
