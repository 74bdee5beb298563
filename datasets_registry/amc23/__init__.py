"""AMC 2023: 40 problems of AMC 12A (22) and 12B (18) 2023 with numeric answers (the choices left out).
Upstream: Qwen2.5-Math's evaluation data; it stores answers as floats (27.0), kept here as answer_raw."""

from pipeline_kit.benchmark_helpers import Source, aops_problem, plain_number

GROUP = "math"
METRICS_TYPE = "math"
PROMPT_CONFIG = "generic/math"
SPLIT = "test"
NUM_SAMPLES = 8
TEMPERATURE = 0.6
TOP_P = 0.95
TOKENS_TO_GENERATE = 8192
REQUIRES_SANDBOX = False
EXTRACT = "boxed"  # the last \boxed{} is the answer; none, no answer (as published numbers count)
SOURCE = Source(
    "https://raw.githubusercontent.com/QwenLM/Qwen2.5-Math/a45202bd16f1ec06f433442dc1152d0074773465/"
    "evaluation/data/amc23/test.jsonl",
    "jsonl",
)
LICENSE = "MIT"  # Qwen2.5-Math's evaluation data; the problems are the MAA's
ROWS = 40
FINGERPRINT = "e1deae6aceb8eeee"  # of the records kit prepares from SOURCE


def prepare(row: dict, index: int) -> dict:
    year, contest, number = aops_problem(row["url"])
    return {
        "id": f"amc23-{index}",
        "problem": row["question"],
        "expected_answer": plain_number(row["answer"]),
        "answer_raw": str(row["answer"]),
        "url": row["url"],
        "year": year,
        "contest": contest,
        "problem_number": number,
        "source_id": row["id"],
    }
