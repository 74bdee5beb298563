"""Algebra222: 222 algebra word problems (OpenStax Elementary Algebra 2e and others), numeric answers.
Upstream: the CSV of the declarative-math-word-problem repo; the answer is final_answer as a number."""

from pipeline_kit.benchmark_helpers import Source

GROUP = "math"
METRICS_TYPE = "math"
PROMPT_CONFIG = "generic/math"
SPLIT = "test"
NUM_SAMPLES = 0
TEMPERATURE = 0.6
TOP_P = 0.95
TOKENS_TO_GENERATE = 2048
REQUIRES_SANDBOX = False
EXTRACT = "boxed"  # the last \boxed{} is the answer; none, no answer (as published numbers count)
SOURCE = Source(
    "https://raw.githubusercontent.com/joyheyueya/declarative-math-word-problem/7dc99c39f53e108103a84ff8c7ef5d4857ad34ff/"
    "algebra222.csv",
    "csv",
)
LICENSE = "CC BY-SA 4.0"  # attribution, share-alike; problems from OpenStax (CC BY 4.0)
ROWS = 222
FINGERPRINT = "1d1b5349dd77d390"  # of the records kit prepares from SOURCE


def prepare(row: dict, index: int) -> dict:
    return {
        "id": f"algebra222-{index}",
        "problem": row["question"],
        "expected_answer": decimal_answer(row["final_answer"]),
        "answer_raw": row["final_answer"],
        "section": row["section"],
        "source": row["source"],
    }


def decimal_answer(text: str) -> str:
    """A number as NeMo-Skills writes it: its float value, as an integer when whole ('9.570' -> '9.57', '4.0' -> '4')."""
    value = float(text)
    return str(int(value)) if value.is_integer() else str(value)
