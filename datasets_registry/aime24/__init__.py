"""AIME 2024: the 30 problems of AIME I and II 2024, integer answers 0-999.
Upstream: Qwen2.5-Math's evaluation data; its answers keep leading zeros ("025"), kept here as answer_raw."""

from pipeline_kit.benchmark_helpers import Source, aops_problem, plain_number

GROUP = "math"
METRICS_TYPE = "math"
PROMPT_CONFIG = "generic/math"
SPLIT = "test"
NUM_SAMPLES = 16
TEMPERATURE = 0.6
TOP_P = 0.95
TOKENS_TO_GENERATE = 8192
REQUIRES_SANDBOX = False
EXTRACT = "boxed"  # the last \boxed{} is the answer; none, no answer (as published numbers count)
SOURCE = Source(
    "https://raw.githubusercontent.com/QwenLM/Qwen2.5-Math/a45202bd16f1ec06f433442dc1152d0074773465/"
    "evaluation/data/aime24/test.jsonl",
    "jsonl",
)
LICENSE = "MIT"  # Qwen2.5-Math's evaluation data; the problems are the MAA's
ROWS = 30
FINGERPRINT = "ea97037c545bfc2f"  # of the records kit prepares from SOURCE


def prepare(row: dict, index: int) -> dict:
    year, contest, number = aops_problem(row["url"])
    return {
        "id": f"aime24-{index}",
        "problem": row["problem"],
        "expected_answer": plain_number(row["answer"]),
        "solution": row["solution"],
        "url": row["url"],
        "year": year,
        "contest": contest,
        "problem_number": number,
        "source_id": row["id"],
        "answer_raw": str(row["answer"]),
    }
