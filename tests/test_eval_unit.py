"""`kit eval`'s own logic without a server: the --benchmarks grammar and its errors, and the jobs it builds (one
path through the generate builder: generation + grading per benchmark, a summarize job after all)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline_kit.errors import UserError
from pipeline_kit.jobs.evaluate import BenchmarkRequest, parse_benchmarks

KNOWN = ["aime24", "arith", "math", "math500"]
REPO = Path(__file__).resolve().parent.parent


def test_benchmark_spec_grammar():
    assert parse_benchmarks("math:8,aime24:16", KNOWN) == [BenchmarkRequest("math", 8), BenchmarkRequest("aime24", 16)]
    assert parse_benchmarks("math500,arith:0", KNOWN) == [BenchmarkRequest("math500", 0), BenchmarkRequest("arith", 0)]


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("math:8, aime24:16", "has spaces"),
        ("math:8,math:4", "names 'math' twice"),
        ("math5000:4", "unknown benchmark 'math5000'. Did you mean 'math500'? Known: aime24, arith, math, math500."),
        ("math:x", "entry 'math:x' is not name or name:N"),
        ("math:-1", "entry 'math:-1' is not name or name:N"),
        ("math:8,", "entry '' is not name or name:N"),
        ("", "--benchmarks is empty"),
    ],
)
def test_benchmark_spec_errors_are_one_line(text, needle):
    with pytest.raises(UserError, match=None) as e:
        parse_benchmarks(text, KNOWN)
    assert needle in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_grading_command_takes_each_benchmarks_extraction_mode_or_the_flag(tmp_path):
    from pipeline_kit.jobs.evaluate import GRADE_COMMAND, EvalSpec
    from pipeline_kit.servers.base import ServerSpec

    extra = tmp_path / "extra"
    extra.mkdir()
    module = (REPO / "datasets_registry" / "arith" / "__init__.py").read_text()
    (extra / "stated.py").write_text(module.replace('EXTRACT = "boxed"', 'EXTRACT = "auto"'))
    spec = EvalSpec(
        ServerSpec("openai", "m", address="http://127.0.0.1:9/v1"), [], str(tmp_path), extra_datasets=str(extra)
    )
    commands = {n: spec.generate_spec(BenchmarkRequest(n)).postprocess_cmd for n in ("arith", "stated")}
    assert commands == {"arith": f"{GRADE_COMMAND} --extract=boxed", "stated": f"{GRADE_COMMAND} --extract=auto"}
    spec.extract = "auto"
    assert spec.generate_spec(BenchmarkRequest("arith")).postprocess_cmd == f"{GRADE_COMMAND} --extract=auto"


def test_grade_overrides_go_to_the_grading_step_checked(tmp_path):
    """`kit eval ++grade.KEY=VALUE` sets the grading step's --KEY=VALUE (docs/generation/index.md); the rest goes to
    generation; an unknown grading key or a bad value is one line before anything is planned."""
    from pipeline_kit.jobs.evaluate import GRADE_COMMAND, EvalSpec
    from pipeline_kit.servers.base import ServerSpec

    server = ServerSpec("openai", "m", address="http://127.0.0.1:9/v1")
    given = ("++inference.temperature=0.7", "++grade.timeout=30", "++grade.workers=0")
    gen = EvalSpec(server, [], str(tmp_path), overrides=given).generate_spec(BenchmarkRequest("arith"))
    assert gen.postprocess_cmd == f"{GRADE_COMMAND} --extract=boxed --timeout=30 --workers=0"
    assert "++inference.temperature=0.7" in gen.overrides and not any("grade" in o for o in gen.overrides)
    for bad, needle in [
        ("++grade.tolerance=1e-6", "++grade.tolerance: grading has no such setting; known: ++grade.timeout, "),
        ("++grade.timeout=soon", "++grade.timeout=soon: not a float."),
        ("++grade.timeout=-1", "--timeout must be a positive number of seconds, got -1.0."),
        ("++grde.timeout=1", "Did you mean 'grade'"),
    ]:
        with pytest.raises(UserError) as e:
            EvalSpec(server, [], str(tmp_path), overrides=(bad,)).generate_spec(BenchmarkRequest("arith"))
        assert needle in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_genselect_runs_after_every_generation_succeeded_and_the_summary_after_all(tmp_path):
    """--genselect on Slurm, packed into 2 generation jobs each chained once (--dependent_jobs=1): one GenSelect job
    (one server, every benchmark's picks) waits afterok for the last copy of the chain; the summary waits for
    generation and GenSelect alike, and does not need GenSelect's folders to exist (it was skipped after a failure)."""
    from pipeline_kit.cluster import ClusterConfig
    from pipeline_kit.jobs.evaluate import EvalSpec, eval_jobs
    from pipeline_kit.jobs.options import JobOptions
    from pipeline_kit.servers.base import ServerSpec

    data = tmp_path / "data"
    for name in ("arith", "math500"):
        (data / name).mkdir(parents=True)
        (data / name / "test.jsonl").write_text('{"problem": "1+1", "expected_answer": "2"}\n')
    cluster = ClusterConfig("c.yaml", "slurm", str(tmp_path / "jobs"))
    out = tmp_path / "out"
    spec = EvalSpec(ServerSpec("vllm", "/models/m"), parse_benchmarks("arith:4,math500:2", KNOWN), str(out),
                    data_dir=str(data), num_jobs=2, genselect=True)  # fmt: skip
    jobs = eval_jobs(cluster, spec, JobOptions("ev", dependent_jobs=1))
    assert [j.name for j in jobs] == ["ev", "ev-dep1", "ev-genselect", "ev-summarize"]
    generation, dep, picking, summary = jobs
    assert picking.after == [dep] and picking.dependency_type == "afterok" and len(picking.groups) == 2  # + server
    assert picking.outputs == [f"{out}/eval-results/{b}/genselect" for b in ("arith", "math500")]
    assert summary.after == [generation, dep, picking] and summary.dependency_type is None
    assert not any(path.endswith("/genselect") for path in summary.inputs), summary.inputs
