"""`kit eval` end to end with the tiny model: two benchmarks × 2 seeds, generated, graded in the same job and
summarized, on none through a real vLLM server and on the local Slurm (an array of generation jobs, then the
summarize job); resuming; and its bad-input errors."""

from __future__ import annotations

import json
import re

import pytest
from conftest import SERVICES, client_python, need, rows, sacct

# a second benchmark, defined as a user would (--extra_datasets): ten additions with a carry, made here
SUMS = '''"""Ten two-term additions with a carry, made here."""
GROUP = "math"
METRICS_TYPE = "math"
PROMPT_CONFIG = "generic/math"
SPLIT = "test"
NUM_SAMPLES = 2
TEMPERATURE = 0.7
TOP_P = 0.95
TOKENS_TO_GENERATE = 12
REQUIRES_SANDBOX = False
SOURCE = None


def generate():
    return [{"id": f"s{i}", "problem": f"What is {i}+{9 - i % 3}?", "expected_answer": str(i + 9 - i % 3)}
            for i in range(1, 11)]
'''
VLLM_ENV = [
    "VLLM_ENABLE_V1_MULTIPROCESSING=0",
    "VLLM_CPU_OMP_THREADS_BIND=nobind",
    "VLLM_NO_USAGE_STATS=1",
    "HF_HUB_OFFLINE=1",
    "TRANSFORMERS_OFFLINE=1",
]


@pytest.fixture
def benchmarks(kit, tmp_path):
    """(--extra_datasets flag, --data_dir flag) with arith and the user's `sums` prepared."""
    extra = tmp_path / "my_benchmarks"
    extra.mkdir()
    (extra / "sums.py").write_text(SUMS)
    data = tmp_path / "data"
    res = kit("prepare_data", "arith", "sums", f"--extra_datasets={extra}", f"--data_dir={data}")
    assert res.returncode == 0, res.stderr
    return [f"--extra_datasets={extra}", f"--data_dir={data}"]


def check_results(out, kit_stdout: str) -> dict:
    for bench, n in (("arith", 50), ("sums", 10)):
        for seed in (0, 1):
            records = rows(out / "eval-results" / bench / f"output-rs{seed}.jsonl")
            assert len(records) == n and all("symbolic_correct" in r and "predicted_answer" in r for r in records)
            assert {r["extract_mode"] for r in records} == {"boxed"}  # both benchmarks' own mode (EXTRACT, default)
    metrics = json.loads((out / "metrics.json").read_text())
    assert set(metrics) == {"arith", "sums"}, metrics
    assert metrics["arith"]["pass@1[avg-of-2]"]["symbolic_correct"] >= 60, metrics["arith"]  # trained on these
    for bench in ("arith", "sums"):
        m = metrics[bench]
        assert m["pass@1"]["symbolic_correct"] <= m["pass@2"]["symbolic_correct"] <= 100, m
    assert "- arith -" in kit_stdout and "- sums -" in kit_stdout and "majority@2" in kit_stdout  # the tables
    return metrics


@pytest.mark.models
def test_eval_on_none_through_vllm_then_resume(kit, configs, benchmarks, tmp_path):
    need("KIT_TEST_VLLM_PYTHON", "the vLLM venv and tiny model")
    env = [*VLLM_ENV, "VLLM_CPU_KVCACHE_SPACE=1", f"KIT_SERVER_PYTHON={SERVICES['KIT_TEST_VLLM_PYTHON']}"]
    d = configs("local", "executor: none\njob_dir: JOB_DIR\nenv_vars:\n" + "".join(f"  - {e}\n" for e in env))
    out = tmp_path / "results"
    argv = [
        "eval", "--cluster=local", f"--config_dir={d}", "--server_type=vllm", f"--model={SERVICES['KIT_TEST_TINY_MODEL']}",
        "--server_args=--max-model-len 512 --dtype float32 --enforce-eager", "--benchmarks=arith:2,sums:2",
        f"--output_dir={out}", *benchmarks, "++inference.tokens_to_generate=12", "++max_concurrent_requests=8",
    ]  # fmt: skip
    res = kit(*argv, timeout=900)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    metrics = check_results(out, res.stdout)
    # the same eval again: every unit is done, nothing is generated; the summary is the same
    again = kit(*argv, timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "nothing to generate" in again.stderr  # the job says so as it runs
    assert json.loads((out / "metrics.json").read_text()) == metrics
    # a changed setting is caught by the content-keyed .done records
    changed = kit(*argv[:-2], "++inference.tokens_to_generate=16", "++max_concurrent_requests=8", timeout=300)
    assert changed.returncode == 2 and "inference.tokens_to_generate: 12 → 16" in changed.stderr, changed.stderr


@pytest.mark.models
@pytest.mark.slurm
def test_eval_on_slurm_summarizes_after_the_generation_array(kit, configs, benchmarks, tmp_path):
    """The same eval on the local Slurm through vLLM: the units packed into a 2-element array (each element its own
    vLLM server), then the summarize job, which starts only after both elements ended."""
    need("SLURM_CONF", "the local Slurm cluster")
    need("KIT_TEST_VLLM_PYTHON", "the vLLM venv and tiny model")

    env = [
        *VLLM_ENV, "VLLM_CPU_KVCACHE_SPACE=1", f"KIT_SERVER_PYTHON={SERVICES['KIT_TEST_VLLM_PYTHON']}",
        f"KIT_CLIENT_PYTHON={client_python()}",
    ]  # fmt: skip
    d = configs(
        "slurm",
        "executor: slurm\njob_dir: JOB_DIR\naccount: root\npartition: debug\nenv_vars:\n"
        + "".join(f"  - {e}\n" for e in env),
    )
    out = tmp_path / "results"
    res = kit(
        "eval", "--cluster=slurm", f"--config_dir={d}", "--expname=ev", "--server_type=vllm",
        f"--model={SERVICES['KIT_TEST_TINY_MODEL']}", "--server_args=--max-model-len 512 --dtype float32 --enforce-eager",
        "--benchmarks=arith:2,sums:2", "--num_jobs=2", "--wait", f"--output_dir={out}", *benchmarks,
        "++inference.tokens_to_generate=12", "++max_concurrent_requests=8", timeout=900,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    check_results(out, res.stdout)
    ids = dict(re.findall(r"job (\S+) SUCCEEDED \(slurm job (\d+)\)", res.stdout))
    assert set(ids) == {"ev", "ev-summarize"}, res.stdout
    jobs = sacct([ids["ev"], ids["ev-summarize"]], "Start")
    ends = [row["End"] for row in jobs if row["JobID"].startswith(f"{ids['ev']}_")]
    start = next(row["Start"] for row in jobs if row["JobID"] == ids["ev-summarize"])
    assert len(ends) == 2 and all(start >= end for end in ends), jobs  # after both array elements


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--benchmarks=arith:2,nosuch"], "unknown benchmark 'nosuch'"),
        (["--benchmarks=arith:two"], "entry 'arith:two' is not name or name:N"),
        (["--benchmarks=arith, sums"], "has spaces"),
        (["--benchmarks=math500"], "benchmark 'math500' has no data at"),
        (
            ["--benchmarks=arith", "--extract=last"],
            "--extract='last' is not an extraction mode; use one of: boxed, auto",
        ),
    ],
)
def test_eval_bad_input_is_one_line(kit, configs, tmp_path, flags, needle):
    d = configs("local", "executor: none\njob_dir: JOB_DIR\n")
    res = kit(
        "eval", "--cluster=local", f"--config_dir={d}", "--server_type=openai", "--server_address=http://127.0.0.1:9/v1",
        "--model=m", f"--output_dir={tmp_path / 'out'}", f"--data_dir={tmp_path / 'nodata'}", *flags,
    )  # fmt: skip
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and needle in res.stderr, res.stderr


@pytest.mark.parametrize("packing", ["--num_jobs=1", "--num_jobs=auto"])
def test_a_benchmark_not_prepared_says_how_to_prepare_it_on_slurm_too(kit, configs, tmp_path, packing):
    """On Slurm kit checks the inputs it can see at submission (a login node's): a missing data file of a benchmark
    names `kit prepare_data`, as on none, not only "fix the path"."""
    d = configs("slurm", "executor: slurm\njob_dir: JOB_DIR\naccount: root\npartition: debug\n")
    res = kit(
        "eval", "--cluster=slurm", f"--config_dir={d}", "--server_type=openai", "--server_address=http://127.0.0.1:9/v1",
        "--model=m", f"--output_dir={tmp_path / 'out'}", f"--data_dir={tmp_path / 'nodata'}", "--benchmarks=math500:2",
        packing,
    )  # fmt: skip
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    want = (
        f"it is the data of benchmark 'math500': run `kit prepare_data math500 --data_dir={tmp_path / 'nodata'}` first."
    )
    assert res.stderr.rstrip().endswith(want), res.stderr


def test_judge_stage_writes_verdicts_beside_the_results_and_resumes(kit, configs, stub, benchmarks, tmp_path):
    """An LLM judge (the stub, which says Yes when the predicted answer is the expected string) as a dependent
    stage: summarize gets judge_correct from its output; a second run redoes nothing."""
    d = configs("local", "executor: none\njob_dir: JOB_DIR\n")
    model, judge = stub(), stub()
    out = tmp_path / "results"
    argv = [
        "eval", "--cluster=local", f"--config_dir={d}", "--server_type=openai", f"--server_address={model.url}",
        "--model=m", "--benchmarks=arith:2", f"--output_dir={out}", *benchmarks, "--judge_model=j",
        "--judge_server_type=openai", f"--judge_server_address={judge.url}",
    ]  # fmt: skip
    res = kit(*argv)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr
    assert len(judge.requests()) == 100 and all("Predicted answer:" in r["prompt"] for r in judge.requests())
    metrics = json.loads((out / "metrics.json").read_text())["arith"]
    for row in ("pass@1[avg-of-2]", "majority@2", "pass@2"):
        assert metrics[row]["judge_correct"] == metrics[row]["symbolic_correct"], metrics[row]
    assert "judge_correct" in res.stdout and "both_correct" in res.stdout
    plan = json.loads((out / "eval-results" / "arith" / ".kit-plan.json").read_text())
    assert plan == {"outputs": ["output-rs0.jsonl", "output-rs1.jsonl"]}  # written at submission
    for seed in (0, 1):
        assert (out / "eval-results" / "arith" / f"judge-rs{seed}" / "output.jsonl.done").exists()
        assert all("judge_correct" not in r for r in rows(out / "eval-results" / "arith" / f"output-rs{seed}.jsonl"))
    again = kit(*argv)
    assert again.returncode == 0 and len(judge.requests()) == 100, again.stdout + again.stderr


# a benchmark whose answer is the problem's number plus 2: the stub (--add_seed) answers number + seed, so of 3 seeds
# only seed 2 is right, and the stub's GenSelect judgment (the largest boxed number) picks it
PLUS_TWO = (
    SUMS.replace('"""Ten two-term additions with a carry, made here."""', '"""Add two, ten times."""')
    .replace(
        'return [{"id": f"s{i}", "problem": f"What is {i}+{9 - i % 3}?", "expected_answer": str(i + 9 - i % 3)}',
        'return [{"id": f"p{i}", "problem": f"Add two to {i}", "expected_answer": str(i + 2)}',
    )
    .replace("TOKENS_TO_GENERATE = 12", "TOKENS_TO_GENERATE = 200")
)


def test_eval_genselect_of_a_reasoning_models_samples_beside_pass_and_majority(kit, configs, stub, tmp_path):
    """`kit eval --genselect ++parse_reasoning=true` (the AIMO-2 evaluation) against the stub as a reasoning model:
    3 samples per problem, their thinking split off; GenSelect's prompts hold only the answers (a thinking's guess,
    boxed too, would move the stub's pick), and the summary shows pass@1, majority@3 and genselect@3 together."""
    extra = tmp_path / "my_benchmarks"
    extra.mkdir()
    (extra / "plus_two.py").write_text(PLUS_TWO)
    data = [f"--extra_datasets={extra}", f"--data_dir={tmp_path / 'data'}"]
    assert kit("prepare_data", "plus_two", *data).returncode == 0
    d = configs("local", "executor: none\njob_dir: JOB_DIR\n")
    server, out = stub("--add_seed", "--think"), tmp_path / "results"
    argv = [
        "eval", "--cluster=local", f"--config_dir={d}", "--server_type=openai", f"--server_address={server.url}",
        "--model=m", "--benchmarks=plus_two:3", f"--output_dir={out}", *data, "--genselect", "++parse_reasoning=true",
    ]  # fmt: skip
    res = kit(*argv)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr
    picked = rows(out / "eval-results" / "plus_two" / "genselect" / "output.jsonl")
    assert [r["genselect"]["chosen_run"] for r in picked] == ["output-rs2.jsonl"] * 10, picked
    assert all(r["genselect"]["decided_by"] == "judgment" for r in picked)
    asked = [r["prompt"] for r in server.requests() if "Solution 0:" in r["prompt"]]
    assert len(asked) == 10 and not any("Maybe" in p or "<think>" in p for p in asked), asked[:1]
    metrics = json.loads((out / "metrics.json").read_text())["plus_two"]
    assert metrics["genselect@3"]["symbolic_correct"] == 100.0 and metrics["pass@3"]["symbolic_correct"] == 100.0
    assert round(metrics["pass@1[avg-of-3]"]["symbolic_correct"], 2) == 33.33, metrics
    assert metrics["reasoning"]["samples"] == 30 and metrics["reasoning"]["truncated_reasoning"] == 0, metrics
    table = res.stdout[res.stdout.index("- plus_two -") :]
    assert all(row in table for row in ("pass@1[avg-of-3]", "majority@3", "genselect@3", "pass@3")), table
    again = kit(*argv)
    assert again.returncode == 0 and len(server.requests()) == 40, again.stdout[-2000:] + again.stderr


def test_eval_genselect_needs_samples_of_every_benchmark(kit, configs, tmp_path):
    """Refused before any data is read: each benchmark with fewer than 2 samples is named."""
    d = configs("local", "executor: none\njob_dir: JOB_DIR\n")
    res = kit(
        "eval", "--cluster=local", f"--config_dir={d}", "--server_type=openai", "--server_address=http://127.0.0.1:9/v1",
        "--model=m", f"--output_dir={tmp_path / 'out'}", "--benchmarks=arith:4,aime24:1,math500", "--genselect",
    )  # fmt: skip
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert "--benchmarks gives aime24:1, math500:0: ask for at least 2" in res.stderr, res.stderr


def test_judge_verdict_is_its_last_judgement_line():
    from pipeline_kit.evaluation.judge import parse_verdict, verdict

    assert verdict("It matches.\nJudgement: Yes") is True
    assert verdict("Judgement: Yes\nOn second thought...\n**Judgement**: no") is False
    assert verdict("judgment: YES") is True
    assert verdict("no verdict here") is False and verdict(None) is False
    # no verdict is its own state: None, not a "no" (summarize counts it apart)
    assert parse_verdict("no verdict here") is None and parse_verdict("Judgement: No") is False


def test_a_prepared_file_whose_rows_changed_is_refused_before_anything_is_queued(kit, configs, tmp_path):
    """`kit prepare_data` records the rows it wrote (<split>.meta.json); a file cut off or edited by hand since is
    named, with both fingerprints, and nothing runs."""
    d = configs("local", "executor: none\njob_dir: JOB_DIR\n")
    data = tmp_path / "data"
    assert kit("prepare_data", "arith", f"--data_dir={data}").returncode == 0
    path = data / "arith" / "test.jsonl"
    out = tmp_path / "out"
    argv = [
        "eval", "--cluster=local", f"--config_dir={d}", "--server_type=openai", "--server_address=http://127.0.0.1:9/v1",
        "--model=m", f"--output_dir={out}", f"--data_dir={data}", "--benchmarks=arith:2",
    ]  # fmt: skip
    path.write_text(path.read_text())  # rewritten, the same rows: read again (another mtime), and accepted
    res = kit(*argv, "--dry_run")
    assert res.returncode == 0, res.stderr
    path.write_text("".join(path.read_text().splitlines(keepends=True)[:-1]))  # the last row lost
    res = kit(*argv)
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert f"{path} holds 49 rows, fingerprint " in res.stderr
    assert "but `kit prepare_data` wrote 50 rows, fingerprint 98b122504658" in res.stderr
    assert "the file was edited or cut off. Run `kit prepare_data arith` again" in res.stderr
    assert not out.exists()
    (data / "arith" / "test.meta.json").unlink()  # as it says: evaluate the file as it is
    assert "holds 49 rows" not in kit(*argv, "--dry_run").stderr


def test_grade_overrides_reach_the_grading_command_and_a_typo_is_one_line(kit, configs, tmp_path):
    """`kit eval ++grade.timeout=30`: the grading step's command line gets --timeout=30 (generation does not see it);
    an unknown grading key stops the run before anything is queued, as any unknown ++key does."""
    d = configs("local", "executor: none\njob_dir: JOB_DIR\n")
    data = tmp_path / "data"
    assert kit("prepare_data", "arith", f"--data_dir={data}").returncode == 0
    argv = [
        "eval", "--cluster=local", f"--config_dir={d}", "--server_type=openai", "--server_address=http://127.0.0.1:9/v1",
        "--model=m", f"--output_dir={tmp_path / 'out'}", f"--data_dir={data}", "--benchmarks=arith:2",
    ]  # fmt: skip
    res = kit(*argv, "++grade.timeout=30", "--dry_run")
    assert res.returncode == 0, res.stderr
    assert '-m pipeline_kit.grading.grade "$KIT_OUTPUT_FILE" --extract=boxed --timeout=30' in res.stdout
    assert "++grade" not in res.stdout and "++timeout" not in res.stdout
    res = kit(*argv, "++grade.tolerance=1e-6")
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert "++grade.tolerance: grading has no such setting; known: ++grade.timeout, ++grade.workers." in res.stderr
    assert not (tmp_path / "out").exists()
