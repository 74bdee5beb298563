"""GSM8K: the 1,319 grade-school word problems of the test split, integer answers.
Upstream: OpenAI's grade-school-math repo; the answer is the text after `####`, commas removed."""

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
    "https://raw.githubusercontent.com/openai/grade-school-math/3101c7d5072418e28b9008a6636bde82a006892c/"
    "grade_school_math/data/test.jsonl",
    "jsonl",
)
LICENSE = "MIT"
ROWS = 1319
FINGERPRINT = "32a787d77c064175"  # of the records kit prepares from SOURCE


def prepare(row: dict, index: int) -> dict:
    solution = row["answer"]
    if "####" not in solution:
        raise ValueError("its answer has no '#### <number>' line")
    return {
        "id": f"gsm8k-{index}",
        "problem": row["question"],
        "expected_answer": solution.rsplit("####", 1)[1].strip().replace(",", ""),
        "solution": solution,
    }
