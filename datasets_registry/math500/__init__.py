"""MATH-500: 500 problems of the MATH test set (the PRM800K split), LaTeX answers, subject and level 1-5.
Upstream: simpleRL-reason's copy (the same file as math-evaluation-harness' data/math500), `answer` per row."""

from pipeline_kit.benchmark_helpers import Source

GROUP = "math"
METRICS_TYPE = "math"
PROMPT_CONFIG = "generic/math"
SPLIT = "test"
NUM_SAMPLES = 4
TEMPERATURE = 0.6
TOP_P = 0.95
TOKENS_TO_GENERATE = 4096
REQUIRES_SANDBOX = False
EXTRACT = "boxed"  # the last \boxed{} is the answer; none, no answer (as published numbers count)
SOURCE = Source(
    "https://raw.githubusercontent.com/hkust-nlp/simpleRL-reason/cf1c7858bfc145a27aa733e75d930d34f0d318a6/"
    "examples/simplelr_math_eval/data/math500/test.jsonl",
    "jsonl",
)
LICENSE = "MIT"  # MATH, Hendrycks et al.
ROWS = 500
FINGERPRINT = "5ce32ee058d492d3"  # of the records kit prepares from SOURCE


def prepare(row: dict, index: int) -> dict:
    # unique_id is MATH's own file name (test/<subject>/<n>.json): the id that other MATH-500 copies share
    return {
        "id": row["unique_id"],
        "problem": row["problem"],
        "expected_answer": row["answer"],
        "solution": row["solution"],
        "subject": row["subject"],
        "level": row["level"],
        "unique_id": row["unique_id"],
    }
