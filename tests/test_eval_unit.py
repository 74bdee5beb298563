"""`kit eval`'s own logic without a server: the --benchmarks grammar and its errors, and the jobs it builds (one
path through the generate builder: generation + grading per benchmark, a summarize job after all)."""

from __future__ import annotations

import pytest

from pipeline_kit.errors import UserError
from pipeline_kit.jobs.evaluate import BenchmarkRequest, parse_benchmarks

KNOWN = ["aime24", "arith", "math", "math500"]


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
