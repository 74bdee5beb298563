"""Minerva Math: 272 undergraduate science and math problems (MIT OCW), the set of the Minerva paper.
Upstream: Qwen2.5-Math's evaluation data; the answer is the last \\boxed{} of the solution (some are Python-ish)."""

from pipeline_kit.benchmark_helpers import Source, boxed_content

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
    "https://raw.githubusercontent.com/QwenLM/Qwen2.5-Math/a45202bd16f1ec06f433442dc1152d0074773465/"
    "evaluation/data/minerva_math/test.jsonl",
    "jsonl",
)
LICENSE = "MIT"  # Qwen2.5-Math's evaluation data; the problems are MIT OCW's
ROWS = 272
FINGERPRINT = "f841dfd5108ce1d9"  # of the records kit prepares from SOURCE


def prepare(row: dict, index: int) -> dict:
    answer = boxed_content(row["solution"], verbatim=True)
    if answer is None:
        raise ValueError("its solution has no \\boxed{} answer")
    return {
        "id": f"minerva_math-{index}",
        "problem": row["problem"],
        "expected_answer": answer,
        "solution": row["solution"],
        "type": row["type"],
        "source_id": index,
    }
