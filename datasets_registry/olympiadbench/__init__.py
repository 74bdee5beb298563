"""OlympiadBench: 675 open-ended, text-only, English competition math problems (OE_TO_maths_en_COMP).
Upstream: Qwen2.5-Math's evaluation data; the answer is `final_answer` joined with ", ", without `$`."""

from pipeline_kit.benchmark_helpers import Source

GROUP = "math"
METRICS_TYPE = "math"
PROMPT_CONFIG = "generic/math"
SPLIT = "test"
NUM_SAMPLES = 4
TEMPERATURE = 0.6
TOP_P = 0.95
TOKENS_TO_GENERATE = 8192
REQUIRES_SANDBOX = False
EXTRACT = "boxed"  # the last \boxed{} is the answer; none, no answer (as published numbers count)
SOURCE = Source(
    "https://raw.githubusercontent.com/QwenLM/Qwen2.5-Math/a45202bd16f1ec06f433442dc1152d0074773465/"
    "evaluation/data/olympiadbench/test.jsonl",
    "jsonl",
)
LICENSE = "MIT"  # Qwen2.5-Math's evaluation data; OlympiadBench itself is Apache-2.0
ROWS = 675
FINGERPRINT = "3a28ea79d2c02a26"  # of the records kit prepares from SOURCE


def prepare(row: dict, index: int) -> dict:
    answers = row["final_answer"]
    if not (isinstance(answers, list) and answers and all(isinstance(a, str) for a in answers)):
        raise ValueError(f"final_answer must be a list of strings, got {answers!r}")
    return {
        "id": f"olympiadbench-{row['id']}",
        "problem": row["question"],
        "expected_answer": ", ".join(a.strip("$") for a in answers),
        "final_answer_list": answers,
        "solution": row["solution"],
        "subfield": row["subfield"],
        "answer_type": row["answer_type"],
        "is_multiple_answer": row["is_multiple_answer"],
        "unit": row["unit"],
        "error": row["error"],
        "context": row["context"],
        "source_id": row["id"],
    }
