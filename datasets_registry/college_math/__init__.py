"""College Math: 2,818 college-level exercises (algebra, calculus, differential equations, ...), LaTeX answers.
Upstream: Qwen2.5-Math's evaluation data; the answer is kept as written there, $...$ included."""

from pipeline_kit.benchmark_helpers import Source

GROUP = "math"
METRICS_TYPE = "math"
PROMPT_CONFIG = "generic/math"
SPLIT = "test"
NUM_SAMPLES = 0
TEMPERATURE = 0.6
TOP_P = 0.95
TOKENS_TO_GENERATE = 4096
REQUIRES_SANDBOX = False
EXTRACT = "boxed"  # the last \boxed{} is the answer; none, no answer (as published numbers count)
SOURCE = Source(
    "https://raw.githubusercontent.com/QwenLM/Qwen2.5-Math/a45202bd16f1ec06f433442dc1152d0074773465/"
    "evaluation/data/college_math/test.jsonl",
    "jsonl",
)
# licence: Qwen2.5-Math's evaluation data is MIT; each row's `license` names its textbook's: CC BY, CC BY-NC-SA, GFDL, ...
LICENSE = "MIT; rows vary (some NC)"
ROWS = 2818
FINGERPRINT = "7d2d84c84553531e"  # of the records kit prepares from SOURCE


def prepare(row: dict, index: int) -> dict:
    record = {"id": f"college_math-{index}", "problem": row["question"], "expected_answer": row["answer"]}
    record.update({k: v for k, v in row.items() if k not in ("question", "answer")})
    return record
